// Replays of captures from a real peer (Linux 6.1 Soft-RoCE, rdma_rxe; see
// tests/data/interop/README.md): a scripted peer plays the rxe side of a
// capture against a live rocemu NIC -- the same opcodes, PSNs, payloads and
// relative timing, with the QPN, rkey, addresses and virtual addresses of
// the live run -- and the NIC's answers are checked against the rules of
// the transport, which the test applies on its own (expected PSN, message
// sequence number, opcode sequence), not against what rocemu once sent.
#include <catch2/catch.hpp>

#include <map>

#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "nic/nic.h"
#include "tests/nic/fabric.h"
#include "tests/nic/probe.h"
#include "tests/support/pcap_file.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::Probe;

namespace {

constexpr int kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr uint32_t kProbeQpn = 0x77;
const auto kRxe = *wire::IpAddr::parse("10.77.0.2");     // the Linux side of the captures
const auto kRocemu = *wire::IpAddr::parse("10.77.0.1");  // the rocemu NIC of the captures

std::string capture(const std::string& name) {
  return std::string(ROCEMU_SOURCE_DIR) + "/tests/data/interop/" + name;
}

// A captured RoCE packet and when it was seen.
struct Captured {
  Time at;
  std::vector<uint8_t> bytes;
  wire::PacketView v;
};

// The RoCE packets of `file` sent from `from`, times relative to the first
// frame of the file.
std::vector<Captured> roce_from(const std::string& file, const wire::IpAddr& from) {
  std::vector<Captured> out;
  const auto frames = test::read_capture(capture(file));
  REQUIRE(!frames.empty());
  const uint64_t t0 = frames.front().ts_ns;
  for (const auto& f : frames) {
    Captured c{ns(int64_t(f.ts_ns - t0)), f.bytes, {}};
    if (wire::decode(c.bytes, c.v) != wire::DecodeError::kOk || !c.v.is_roce || c.v.src_ip() != from) continue;
    out.push_back(std::move(c));
  }
  // The views point into the bytes: decode again where they now live.
  for (auto& c : out) REQUIRE(wire::decode(c.bytes, c.v) == wire::DecodeError::kOk);
  return out;
}

// A rocemu NIC (h1) with one RC QP towards the scripted peer (the probe),
// in RTR from `rq_psn` and then RTS.
struct Replay {
  std::unique_ptr<Engine> engine;
  Nic* nic = nullptr;
  Probe* probe = nullptr;
  std::unique_ptr<SimHost> host;
  SimHost::Cq* cq = nullptr;
  SimHost::Qp* qp = nullptr;
  NicConfig cfg;
  std::vector<uint8_t> mem;
  uint32_t key = 0;

  Replay(LossRecovery mode, uint32_t rq_psn, size_t mem_bytes, uint8_t timeout = 14) : mem(mem_bytes, 0) {
    engine = test::make_engine(5);
    cfg = test::probe_peer_config();
    cfg.recovery = mode;
    nic = &engine->add<Nic>("h1", cfg);
    probe = &engine->add<Probe>();
    REQUIRE(engine->connect(*nic, 0, *probe, 0, LinkParams{.rate_bps = 10'000'000'000ull, .delay = us(1)}).ok());
    engine->start();
    host = std::make_unique<SimHost>(*engine, *nic);
    cq = host->create_cq(64);
    qp = host->create_qp(QpType::kRc, cq, cq, ibv_qp_cap{16, 16, 1, 1, 0});
    key = host->reg_mr(mem.data(), mem.size(), kAll);
    test::probe_qp_to_rtr(*host, qp, QpType::kRc, kProbeQpn, kAll, rq_psn);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    REQUIRE(host->modify(qp, a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC) == 0);
    engine->run_for(us(5));
    probe->got.clear();
  }

  // The captured request `c` as the peer of this run sends it: its QPN,
  // this MR's rkey, and the virtual address moved by `va_shift`.
  void send_request(const wire::PacketView& c, uint64_t va_shift) {
    wire::RoceFields f;
    f.opcode = c.opcode;
    f.dest_qp = qp->qpn;
    f.psn = c.bth().psn();
    f.ack_req = c.bth().ack_req();
    if (c.op().any(wire::kOpFirst) && c.opcode <= wire::op::kWriteOnlyImm) {
      f.reth_va = c.reth().va.get() + va_shift;
      f.reth_rkey = key;
      f.reth_len = c.reth().dma_length.get();
    }
    std::vector<uint8_t> out(wire::roce_frame_len(test::probe_to_nic(cfg), f.opcode, c.payload_len) + 64);
    out.resize(wire::encode_roce(out, test::probe_to_nic(cfg), f, c.payload()));
    inject(out);
  }
  void inject(const std::vector<uint8_t>& frame) {
    rte_mbuf* m = engine->pool().alloc_copy(frame);
    REQUIRE(m != nullptr);
    nic->on_rx(0, &m, 1, engine->now());
  }
  // Every ACK/NAK the NIC sent since the last call.
  std::vector<std::pair<uint32_t, wire::Aeth>> take_acks() {
    std::vector<std::pair<uint32_t, wire::Aeth>> acks;
    for (const auto& fr : probe->got) {
      wire::PacketView v;
      REQUIRE(wire::decode(fr.bytes, v) == wire::DecodeError::kOk);
      REQUIRE(v.is_roce);
      REQUIRE(v.icrc_ok());
      if (v.opcode == wire::op::kAck) acks.push_back({v.bth().psn(), v.aeth()});
    }
    probe->got.clear();
    return acks;
  }
};

// The responder rules for a stream of WRITEs, applied by the test: which
// requests are taken (at the expected PSN, in opcode sequence), the MSN
// after each, where the first opcode-sequence violation is, and what the
// memory holds afterwards.
struct WriteRules {
  uint32_t epsn;
  uint32_t msn = 0;
  bool in_message = false;
  uint64_t write_va = 0;
  std::map<uint32_t, uint32_t> msn_after;  // PSN taken -> MSN once it was
  std::optional<uint32_t> violation;       // PSN of the first opcode out of sequence
  std::vector<uint8_t> image;               // the memory, as the rules fill it
  uint64_t base_va;

  WriteRules(uint32_t first_psn, uint64_t va, size_t bytes) : epsn(first_psn), image(bytes, 0), base_va(va) {}

  void request(const wire::PacketView& v) {
    if (violation || v.bth().psn() != epsn) return;  // duplicate, or out of sequence (NAKed, dropped)
    const auto& info = v.op();
    const bool first = info.any(wire::kOpFirst), last = info.any(wire::kOpLast);
    const bool continues = !first;  // WRITE Middle or Last
    if (continues != in_message) {
      violation = epsn;
      return;
    }
    if (first) write_va = v.reth().va.get();
    const auto p = v.payload();
    REQUIRE(write_va - base_va + p.size() <= image.size());
    std::copy(p.begin(), p.end(), image.begin() + ptrdiff_t(write_va - base_va));
    write_va += p.size();
    in_message = !last;
    if (last) msn++;
    msn_after[epsn] = msn;
    epsn = wire::psn_add(epsn, 1);
  }
};

}  // namespace

// DLY-wbw-ackdelay70ms-rocemu-srv.pcapng (from frame 1782 of the original):
// rocemu's ACKs were delayed 70 ms, past rxe's 67 ms QP timeout, and rxe
// went back and resent -- but renumbered: PSN 2486702 came again as a
// 0-byte WRITE Only (it had been a 64 KiB WRITE First) and every later PSN
// shifted by one, so PSN 2486831, expected as a WRITE Middle, came as a
// WRITE First. The rules answer that with NAK Invalid Request (and the QP
// goes to error); the NIC counts the peer's violation.
TEST_CASE("Replay of rxe's renumbered retransmission: ACKs and MSNs by the rules, NAK Invalid Request at the "
          "first opcode out of sequence, counted as the peer's violation",
          "[protocol][nic][interop]") {
  const auto reqs = roce_from("DLY-wbw-ackdelay70ms-rocemu-srv-from1782.pcapng", kRxe);
  REQUIRE(reqs.size() > 300);
  const uint32_t first_psn = reqs.front().v.bth().psn();
  REQUIRE(reqs.front().v.opcode == wire::op::kWriteFirst);
  uint64_t va_lo = ~0ull, va_hi = 0;
  for (const auto& r : reqs)
    if (r.v.op().any(wire::kOpFirst)) {
      va_lo = std::min(va_lo, r.v.reth().va.get());
      va_hi = std::max(va_hi, r.v.reth().va.get() + r.v.reth().dma_length.get());
    }
  REQUIRE(va_hi > va_lo);
  const size_t bytes = size_t(va_hi - va_lo);
  Replay r(LossRecovery::kGoBackN, first_psn, bytes);
  const uint64_t va_shift = reinterpret_cast<uint64_t>(r.mem.data()) - va_lo;
  WriteRules rules(first_psn, va_lo, bytes);

  std::vector<std::pair<uint32_t, wire::Aeth>> acks;
  const Time start = r.engine->now();
  for (const auto& c : reqs) {
    r.engine->run_until(start + c.at);
    r.send_request(c.v, va_shift);
    rules.request(c.v);
    for (auto& a : r.take_acks()) acks.push_back(a);
  }
  r.engine->run_for(ms(1));
  for (auto& a : r.take_acks()) acks.push_back(a);

  // The rules find the renumbered packet where the capture's README says.
  REQUIRE(rules.violation.has_value());
  CHECK(*rules.violation == 2486831);
  size_t invalid = 0;
  for (const auto& [psn, aeth] : acks) {
    const uint8_t syn = aeth.syndrome();
    INFO("answer PSN " << psn << " syndrome 0x" << std::hex << int(syn) << std::dec << " MSN " << aeth.msn());
    if (syn == wire::aeth_nak(wire::NakCode::kInvalidRequest)) {
      invalid++;
      CHECK(psn == *rules.violation);
      CHECK(aeth.msn() == rules.msn);
    } else if (wire::aeth_kind(syn) == wire::AethKind::kAck) {
      // An ACK (a new one or a duplicate's) covers only PSNs taken, and
      // carries the MSN as of that PSN.
      const auto it = rules.msn_after.find(psn);
      REQUIRE(it != rules.msn_after.end());
      CHECK(aeth.msn() == it->second);
    } else {
      FAIL("unexpected answer");
    }
  }
  CHECK(invalid == 1);
  CHECK(r.nic->counters()[NicCounters::resp_opcode_sequence_err] == 1);
  CHECK(r.nic->counters()[NicCounters::duplicate_request] > 0);
  // Every byte the rules accepted is in memory, and nothing else.
  CHECK(r.mem == rules.image);
}

// SR-wbw-out1-rxe-srv.pcapng: rocemu in selective repeat, rxe's first ACK
// 3.7 ms after the first WRITE packet; rocemu resent it every 100 us and
// failed the QP (retry exceeded) before the ACK came. Replayed with the
// capture's timing: the QP lives and the WRITE completes.
TEST_CASE("Replay of rxe's slow first ACK against selective repeat: the QP survives and the WRITE completes",
          "[protocol][nic][interop][loss]") {
  const auto ours = roce_from("SR-wbw-out1-rxe-srv.pcapng", kRocemu);
  const auto theirs = roce_from("SR-wbw-out1-rxe-srv.pcapng", kRxe);
  REQUIRE(!ours.empty());
  REQUIRE(!theirs.empty());
  const uint32_t cap_psn = ours.front().v.bth().psn();
  // What was on the wire: one WRITE packet, sent again and again.
  for (const auto& o : ours) CHECK(o.v.bth().psn() == cap_psn);
  const Duration ack_delay = theirs.front().at - ours.front().at;
  INFO("rxe's first ACK came " << to_us(ack_delay) << " us after the first WRITE packet");
  REQUIRE(ack_delay > ms(3));

  Replay r(LossRecovery::kSelectiveRepeat, 0, 4096);
  ibv_sge sg{reinterpret_cast<uint64_t>(r.mem.data()), 1024, r.key};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = 0x7ff4a21f9000;
  wr.wr.rdma.rkey = 0x101;
  REQUIRE(r.host->post_send(r.qp, &wr) == 0);
  r.engine->run_for(us(3));
  REQUIRE(!r.probe->got.empty());
  const Time first = r.probe->got.front().at;
  // rxe's ACKs, at their times after the first packet, for the live PSN.
  int completions = 0;
  for (const auto& t : theirs) {
    REQUIRE(t.v.opcode == wire::op::kAck);
    r.engine->run_until(first + (t.at - ours.front().at));
    ibv_wc wc{};
    const int done = r.host->poll(r.cq, 1, &wc);
    INFO("at " << to_us(r.engine->now() - first) << " us: " << done << " completion(s), status "
               << int(wc.status) << ", " << r.nic->counters()[NicCounters::local_ack_timeout_err]
               << " Local ACK Timeouts, " << r.nic->counters()[NicCounters::roce_adp_retrans_to] << " timer resends");
    if (&t == &theirs.front()) REQUIRE(done == 0);  // the QP did not fail before the first ACK
    if (done == 1) CHECK(wc.status == IBV_WC_SUCCESS);
    completions += done;
    wire::RoceFields f;
    f.opcode = wire::op::kAck;
    f.dest_qp = r.qp->qpn;
    f.psn = wire::psn_add(t.v.bth().psn(), -int32_t(cap_psn));  // live PSNs start at 0
    f.aeth_syndrome = t.v.aeth().syndrome();
    f.aeth_msn = t.v.aeth().msn() + 1;  // the live WRITE is one packet: the ACK completes it
    std::vector<uint8_t> out(128);
    out.resize(wire::encode_roce(out, test::probe_to_nic(r.cfg), f, {}));
    r.inject(out);
  }
  r.engine->run_for(us(10));
  ibv_wc wc{};
  completions += r.host->poll(r.cq, 1, &wc);
  CHECK(completions == 1);
  // The first ACK completed the WRITE; the QP is still usable.
  CHECK(r.nic->counters()[NicCounters::req_cqe_error] == 0);
  CHECK(r.nic->counters()[NicCounters::local_ack_timeout_err] == 0);
  r.probe->got.clear();
  REQUIRE(r.host->post_send(r.qp, &wr) == 0);
  r.engine->run_for(us(3));
  CHECK(r.probe->got.size() == 1);
}
