// Replays of captures from a real peer (Linux 6.1 Soft-RoCE, rdma_rxe; see
// tests/data/interop/README.md): a scripted peer plays one side of a
// capture (rxe's requests, or those rocemu sent to an rxe server) against a
// live rocemu NIC -- the same opcodes, PSNs, payloads and relative timing,
// with the QPN, rkey, addresses and virtual addresses of the live run -- and
// the NIC's answers are checked against the rules of the transport, which
// the test applies on its own (expected PSN, message sequence number, opcode
// sequence, a model of memory), not against what rocemu once sent.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

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

// The virtual addresses a capture's requests name (RETH or AtomicETH),
// [lo, hi).
struct VaRange {
  uint64_t lo = ~0ull, hi = 0;
  size_t bytes() const { return size_t(hi - lo); }
};
VaRange va_range(const std::vector<Captured>& reqs) {
  VaRange r;
  for (const auto& c : reqs) {
    if (c.v.op().any(wire::kOpAtomic)) {
      r.lo = std::min(r.lo, c.v.atomic_eth().va.get());
      r.hi = std::max(r.hi, c.v.atomic_eth().va.get() + 8);
    } else if (c.v.op().any(wire::kOpFirst) && c.v.opcode <= wire::op::kWriteOnlyImm) {
      r.lo = std::min(r.lo, c.v.reth().va.get());
      r.hi = std::max(r.hi, c.v.reth().va.get() + c.v.reth().dma_length.get());
    }
  }
  REQUIRE(r.hi > r.lo);
  return r;
}

// What the NIC answered a request with: an ACK/NAK, or an ATOMIC ACK and
// the original value it carries.
struct Answer {
  uint8_t opcode;
  uint32_t psn;
  wire::Aeth aeth;
  uint64_t orig = 0;
};

// A UD QP's Q_Key, for the Replay of a datagram capture.
struct Ud {
  uint32_t qkey;
};

// A rocemu NIC (h1) with one QP towards the scripted peer (the probe): RC,
// in RTR from `rq_psn` and then RTS; or UD with a Q_Key.
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
  std::optional<uint32_t> qkey;  // if set, UD datagrams carry it instead of the captured Q_Key

  Replay(LossRecovery mode, uint32_t rq_psn, size_t mem_bytes, uint8_t timeout = 14)
      : Replay(mode, QpType::kRc, mem_bytes) {
    test::probe_qp_to_rtr(*host, qp, QpType::kRc, test::kRawProbeQpn, test::kAccessAll, rq_psn);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    REQUIRE(host->modify(qp, a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC) == 0);
    settle();
  }
  Replay(Ud ud, size_t mem_bytes) : Replay(LossRecovery::kGoBackN, QpType::kUd, mem_bytes) {
    REQUIRE(host->activate_ud(qp, ud.qkey) == 0);
    settle();
  }

  // The captured request `c` as the peer of this run sends it: its QPN,
  // this MR's rkey, and the virtual address moved by `va_shift`; a UD
  // datagram keeps its Q_Key and source QP. Returns the frame.
  std::vector<uint8_t> send_request(const wire::PacketView& c, uint64_t va_shift) {
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
    if (c.op().any(wire::kOpAtomic)) {
      f.atomic_va = c.atomic_eth().va.get() + va_shift;
      f.atomic_rkey = key;
      f.atomic_swap_add = c.atomic_eth().swap_add.get();
      f.atomic_compare = c.atomic_eth().compare.get();
    }
    if (wire::opcode_transport(c.opcode) == wire::Transport::kUd) {
      f.deth_qkey = qkey.value_or(c.deth().qkey.get());
      f.deth_src_qp = c.deth().src_qp();
    }
    std::vector<uint8_t> out(wire::roce_frame_len(test::probe_to_nic(cfg), f.opcode, c.payload_len) + 64);
    out.resize(wire::encode_roce(out, test::probe_to_nic(cfg), f, c.payload()));
    inject(out);
    return out;
  }
  // An RDMA READ Request from the peer for `len` bytes at `va` (this MR).
  void read_request(uint32_t psn, uint64_t va, uint32_t len) {
    wire::RoceFields f;
    f.opcode = wire::op::kReadRequest;
    f.dest_qp = qp->qpn;
    f.psn = psn;
    f.ack_req = true;
    f.reth_va = va;
    f.reth_rkey = key;
    f.reth_len = len;
    std::vector<uint8_t> out(wire::roce_frame_len(test::probe_to_nic(cfg), f.opcode, 0) + 64);
    out.resize(wire::encode_roce(out, test::probe_to_nic(cfg), f, {}));
    inject(out);
  }
  void inject(const std::vector<uint8_t>& frame) {
    rte_mbuf* m = engine->pool().alloc_copy(frame);
    REQUIRE(m != nullptr);
    nic->on_rx(0, &m, 1, engine->now());
  }
  // Every packet the NIC sent since the last call (each with a valid ICRC).
  std::vector<Captured> take_sent() {
    std::vector<Captured> out;
    for (auto& fr : probe->got) out.push_back({fr.at, std::move(fr.bytes), {}});
    probe->got.clear();
    for (auto& c : out) {
      REQUIRE(wire::decode(c.bytes, c.v) == wire::DecodeError::kOk);
      REQUIRE(c.v.is_roce);
      REQUIRE(c.v.icrc_ok());
    }
    return out;
  }
  // Every ACK/NAK and ATOMIC ACK the NIC sent since the last call.
  std::vector<Answer> take_acks() {
    std::vector<Answer> acks;
    for (const auto& c : take_sent()) {
      const auto& v = c.v;
      if (v.opcode == wire::op::kAck) acks.push_back({v.opcode, v.bth().psn(), v.aeth()});
      if (v.opcode == wire::op::kAtomicAck)
        acks.push_back({v.opcode, v.bth().psn(), v.aeth(), v.atomic_ack().orig.get()});
    }
    return acks;
  }
  // Sends the captured requests with their relative timing, each one
  // also to `rules` (rules.request(view)); returns every answer.
  template <class Rules>
  std::vector<Answer> play(const std::vector<Captured>& reqs, uint64_t va_shift, Rules& rules) {
    std::vector<Answer> acks;
    const Time start = engine->now();
    for (const auto& c : reqs) {
      engine->run_until(start + c.at);
      send_request(c.v, va_shift);
      rules.request(c.v);
      for (auto& a : take_acks()) acks.push_back(a);
    }
    engine->run_for(ms(1));
    for (auto& a : take_acks()) acks.push_back(a);
    return acks;
  }

 private:
  Replay(LossRecovery mode, QpType type, size_t mem_bytes) : mem(mem_bytes, 0) {
    engine = test::make_engine(5);
    cfg = test::probe_peer_config();
    cfg.recovery = mode;
    nic = &engine->add<Nic>("h1", cfg);
    probe = &engine->add<Probe>();
    REQUIRE(engine->connect(*nic, 0, *probe, 0, LinkParams{.rate_bps = 10'000'000'000ull, .delay = us(1)}).ok());
    engine->start();
    host = std::make_unique<SimHost>(*engine, *nic);
    cq = host->create_cq(64);
    qp = host->create_qp(type, cq, cq, ibv_qp_cap{16, 16, 1, 1, 0});
    key = host->reg_mr(mem.data(), mem.size(), test::kAccessAll);
  }
  void settle() {
    engine->run_for(us(5));
    probe->got.clear();
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

// The responder rules for a stream of atomics, applied by the test to a
// model of the 64-bit words they name: the original value each one finds
// (the ATOMIC ACK's), the MSN after it, and the words afterwards.
struct AtomicRules {
  uint32_t epsn;
  uint32_t msn = 0;
  std::map<uint32_t, std::pair<uint64_t, uint32_t>> answer;  // PSN -> original value, MSN
  std::vector<uint8_t> image;
  uint64_t base_va;

  AtomicRules(uint32_t first_psn, uint64_t va, size_t bytes) : epsn(first_psn), image(bytes, 0), base_va(va) {}

  void request(const wire::PacketView& v) {
    if (v.bth().psn() != epsn) return;  // a duplicate is answered from the saved result, not done again
    const auto& a = v.atomic_eth();
    uint8_t* word = image.data() + (a.va.get() - base_va);
    uint64_t orig;
    std::memcpy(&orig, word, 8);
    uint64_t now = orig;
    if (v.opcode == wire::op::kFetchAdd) now = orig + a.swap_add.get();
    else if (orig == a.compare.get()) now = a.swap_add.get();
    std::memcpy(word, &now, 8);
    msn++;
    answer[epsn] = {orig, msn};
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
  const VaRange va = va_range(reqs);
  Replay r(LossRecovery::kGoBackN, first_psn, va.bytes());
  const uint64_t va_shift = reinterpret_cast<uint64_t>(r.mem.data()) - va.lo;
  WriteRules rules(first_psn, va.lo, va.bytes());
  const auto acks = r.play(reqs, va_shift, rules);

  // The rules find the renumbered packet where the capture's README says.
  REQUIRE(rules.violation.has_value());
  CHECK(*rules.violation == 2486831);
  size_t invalid = 0;
  for (const auto& [opcode, psn, aeth, orig] : acks) {
    REQUIRE(opcode == wire::op::kAck);
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

// Memory that does not start at zero, so that an original value or a byte
// the NIC failed to write shows.
void seed(std::vector<uint8_t>& mem) {
  for (size_t i = 0; i < mem.size(); i++) mem[i] = uint8_t(i * 31 + 7);
}

// a40-abw-rxe-srv.pcapng: ib_atomic_bw, rocemu client, rxe server. The
// client's 200 Fetch&Adds are replayed against a live rocemu responder
// whose memory is seeded; the test's model of that memory says what each
// ATOMIC ACK must carry. The same model gives rxe's answers on the wire,
// which checks the model.
TEST_CASE("Replay of ib_atomic_bw's atomics: every ATOMIC ACK carries the original value and MSN of the test's "
          "model of memory, and memory ends as the model",
          "[protocol][nic][interop]") {
  const auto reqs = roce_from("a40-abw-rxe-srv.pcapng", kRocemu);
  const auto rxe = roce_from("a40-abw-rxe-srv.pcapng", kRxe);
  REQUIRE(reqs.size() == 200);
  for (const auto& c : reqs) REQUIRE(c.v.op().any(wire::kOpAtomic));
  const uint32_t first_psn = reqs.front().v.bth().psn();
  const VaRange va = va_range(reqs);

  // perftest filled rxe's buffer with random bytes: the original value rxe
  // answered to the first atomic on a word is where that word started; the
  // model must give every later answer.
  REQUIRE(rxe.size() == reqs.size());
  std::map<uint32_t, uint64_t> rxe_orig;
  for (const auto& a : rxe) rxe_orig[a.v.bth().psn()] = a.v.atomic_ack().orig.get();
  AtomicRules on_wire(first_psn, va.lo, va.bytes());
  std::set<uint64_t> words;
  for (const auto& c : reqs) {
    const uint64_t word = c.v.atomic_eth().va.get();
    if (!words.insert(word).second) continue;
    const auto it = rxe_orig.find(c.v.bth().psn());
    REQUIRE(it != rxe_orig.end());
    std::memcpy(on_wire.image.data() + (word - va.lo), &it->second, 8);
  }
  REQUIRE(words.size() < reqs.size());  // words are hit again: the model is tested
  for (const auto& c : reqs) on_wire.request(c.v);
  for (const auto& a : rxe) {
    REQUIRE(a.v.opcode == wire::op::kAtomicAck);
    const auto it = on_wire.answer.find(a.v.bth().psn());
    REQUIRE(it != on_wire.answer.end());
    CHECK(a.v.atomic_ack().orig.get() == it->second.first);
    CHECK(a.v.aeth().msn() == it->second.second);
  }

  Replay r(LossRecovery::kGoBackN, first_psn, va.bytes());
  seed(r.mem);
  AtomicRules rules(first_psn, va.lo, va.bytes());
  rules.image = r.mem;
  const auto acks = r.play(reqs, reinterpret_cast<uint64_t>(r.mem.data()) - va.lo, rules);
  REQUIRE(rules.answer.size() == reqs.size());
  std::map<uint32_t, int> answered;
  for (const auto& [opcode, psn, aeth, orig] : acks) {
    INFO("answer PSN " << psn << " opcode 0x" << std::hex << int(opcode) << " syndrome 0x" << int(aeth.syndrome())
                       << " original 0x" << orig << std::dec << " MSN " << aeth.msn());
    REQUIRE(opcode == wire::op::kAtomicAck);
    CHECK(wire::aeth_kind(aeth.syndrome()) == wire::AethKind::kAck);
    const auto it = rules.answer.find(psn);
    REQUIRE(it != rules.answer.end());
    CHECK(orig == it->second.first);
    CHECK(aeth.msn() == it->second.second);
    answered[psn]++;
  }
  CHECK(answered.size() == reqs.size());  // each atomic answered once
  for (const auto& [psn, n] : answered) CHECK(n == 1);
  CHECK(r.mem == rules.image);
}

// a40-wbw-rxe-srv-first400.pcapng: ib_write_bw -s 65536, rocemu client, rxe
// server (the first 400 frames). The client's WRITEs are replayed against a
// live rocemu responder. The rules: an ACK names a PSN where the requester
// asked for one (AckReq or a WRITE Last) and carries the MSN as of it; later
// ones may replace a pending ACK (coalescing), so ACK PSNs only go up, and
// the last one names the last such PSN. rxe's own (more coalesced) ACKs on
// the wire follow the same MSN rule.
TEST_CASE("Replay of ib_write_bw's WRITEs: ACK syndromes, MSNs and coalesced ACKs by the rules, memory as written",
          "[protocol][nic][interop]") {
  const auto reqs = roce_from("a40-wbw-rxe-srv-first400.pcapng", kRocemu);
  const auto rxe = roce_from("a40-wbw-rxe-srv-first400.pcapng", kRxe);
  REQUIRE(reqs.size() > 300);
  REQUIRE(reqs.front().v.opcode == wire::op::kWriteFirst);
  const uint32_t first_psn = reqs.front().v.bth().psn();
  const VaRange va = va_range(reqs);

  WriteRules on_wire(first_psn, va.lo, va.bytes());
  for (const auto& c : reqs) on_wire.request(c.v);
  REQUIRE(!on_wire.violation);
  REQUIRE(!rxe.empty());
  for (const auto& a : rxe) {
    REQUIRE(a.v.opcode == wire::op::kAck);
    CHECK(wire::aeth_kind(a.v.aeth().syndrome()) == wire::AethKind::kAck);
    const auto it = on_wire.msn_after.find(a.v.bth().psn());
    REQUIRE(it != on_wire.msn_after.end());
    CHECK(a.v.aeth().msn() == it->second);
  }
  std::set<uint32_t> ack_points;
  for (const auto& c : reqs)
    if (c.v.bth().ack_req() || c.v.op().any(wire::kOpLast)) ack_points.insert(c.v.bth().psn());
  REQUIRE(ack_points.size() > 4);

  Replay r(LossRecovery::kGoBackN, first_psn, va.bytes());
  seed(r.mem);
  WriteRules rules(first_psn, va.lo, va.bytes());
  rules.image = r.mem;
  const auto acks = r.play(reqs, reinterpret_cast<uint64_t>(r.mem.data()) - va.lo, rules);
  REQUIRE(!rules.violation);
  REQUIRE(!acks.empty());
  std::optional<uint32_t> prev;
  for (const auto& [opcode, psn, aeth, orig] : acks) {
    INFO("answer PSN " << psn << " syndrome 0x" << std::hex << int(aeth.syndrome()) << std::dec << " MSN "
                       << aeth.msn());
    REQUIRE(opcode == wire::op::kAck);
    CHECK(wire::aeth_kind(aeth.syndrome()) == wire::AethKind::kAck);
    CHECK(ack_points.count(psn) == 1);
    const auto it = rules.msn_after.find(psn);
    REQUIRE(it != rules.msn_after.end());
    CHECK(aeth.msn() == it->second);
    if (prev) CHECK(wire::psn_gt(psn, *prev));
    prev = psn;
  }
  CHECK(*prev == *std::max_element(ack_points.begin(), ack_points.end(),
                                   [](uint32_t a, uint32_t b) { return wire::psn_lt(a, b); }));
  CHECK(r.nic->counters()[NicCounters::duplicate_request] == 0);
  CHECK(r.nic->counters()[NicCounters::resp_opcode_sequence_err] == 0);
  CHECK(r.mem == rules.image);
}

// a40-udpp-rxe-srv-first100.pcapng: ibv_ud_pingpong, rxe server. rxe's
// datagrams are replayed against a live rocemu UD QP with the capture's
// Q_Key. Each lands in the receive posted for it: 40 bytes of GRH (for
// IPv4, the IP header in its last 20), then the payload; the completion
// names the DETH's source QP. A datagram with another Q_Key is dropped and
// takes no receive.
TEST_CASE("Replay of ibv_ud_pingpong's datagrams: delivered to the receive queue with the GRH, source QP and "
          "payload bytes; a wrong Q_Key is dropped",
          "[protocol][nic][interop]") {
  const auto dgrams = roce_from("a40-udpp-rxe-srv-first100.pcapng", kRxe);
  REQUIRE(dgrams.size() > 20);
  const uint32_t qkey = dgrams.front().v.deth().qkey.get();
  CHECK(qkey == 0x11111111);
  uint32_t max_len = 0;
  for (const auto& d : dgrams) {
    REQUIRE(d.v.opcode == wire::op::ud(wire::op::kSendOnly));
    max_len = std::max(max_len, uint32_t(d.v.payload_len));
  }
  constexpr size_t kSlots = 16;
  const size_t slot_bytes = 40 + max_len;
  Replay r(Ud{qkey}, slot_bytes * kSlots);
  seed(r.mem);
  uint64_t posted = 0;
  auto post_recv = [&] {
    ibv_sge sg{reinterpret_cast<uint64_t>(r.mem.data() + (posted % kSlots) * slot_bytes), uint32_t(slot_bytes),
               r.key};
    ibv_recv_wr wr{};
    wr.wr_id = posted++;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    REQUIRE(r.host->post_recv(r.qp, &wr) == 0);
  };
  // Sends `d` and checks what the receive posted for it holds.
  auto deliver = [&](const Captured& d) {
    post_recv();
    const auto frame = r.send_request(d.v, 0);
    r.engine->run_for(us(5));
    ibv_wc wc{};
    REQUIRE(r.host->poll(r.cq, 1, &wc) == 1);
    CHECK(wc.wr_id == posted - 1);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RECV);
    CHECK(wc.byte_len == 40u + d.v.payload_len);
    CHECK(wc.src_qp == d.v.deth().src_qp());
    CHECK((wc.wc_flags & IBV_WC_GRH) != 0);
    wire::PacketView sent;
    REQUIRE(wire::decode(frame, sent) == wire::DecodeError::kOk);
    const uint8_t* slot = r.mem.data() + (wc.wr_id % kSlots) * slot_bytes;
    CHECK(std::equal(slot + 20, slot + 40, frame.begin() + sent.l3_off));
    CHECK(std::equal(slot + 40, slot + 40 + d.v.payload_len, d.v.payload().begin()));
  };
  const Time start = r.engine->now();
  for (const auto& d : dgrams) {
    r.engine->run_until(std::max(r.engine->now(), start + d.at));
    deliver(d);
  }
  CHECK(r.nic->counters()[NicCounters::rx_ud_qkey_violation] == 0);

  r.qkey = qkey ^ 1;
  post_recv();
  r.send_request(dgrams.back().v, 0);
  r.engine->run_for(us(5));
  ibv_wc wc{};
  CHECK(r.host->poll(r.cq, 1, &wc) == 0);
  CHECK(r.nic->counters()[NicCounters::rx_ud_qkey_violation] == 1);
  // The receive is still there for the next datagram with the right key.
  r.qkey.reset();
  r.send_request(dgrams.back().v, 0);
  r.engine->run_for(us(5));
  REQUIRE(r.host->poll(r.cq, 1, &wc) == 1);
  CHECK(wc.wr_id == posted - 1);
  CHECK(wc.status == IBV_WC_SUCCESS);
}

// None of the captures has an RDMA READ. With the connection of the WRITE
// capture (its PSNs, its 64 KiB message at its virtual address, MTU 1024),
// the peer writes the first message as rxe received it and then reads it
// back, and reads an odd-sized piece and one of less than an MTU. The
// rules: a READ of n bytes is answered at the request's PSN and the next
// ceil(n / MTU) - 1, as READ Response First, Middle..., Last (or Only),
// each an MTU but the last; the MSN counts the READ once its last response
// goes (First carries the MSN before, Last and Only the one after); the
// payload is the memory read.
TEST_CASE("READs on the WRITE capture's connection: responses First/Middle/Last or Only at consecutive PSNs, "
          "MTU-sized but the last, MSN by the rules, payload equal to memory",
          "[protocol][nic][interop]") {
  constexpr uint32_t kMtu = 1024;
  const auto reqs = roce_from("a40-wbw-rxe-srv-first400.pcapng", kRocemu);
  REQUIRE(reqs.front().v.opcode == wire::op::kWriteFirst);
  const uint32_t first_psn = reqs.front().v.bth().psn();
  const uint64_t msg_va = reqs.front().v.reth().va.get();
  const uint32_t msg_len = reqs.front().v.reth().dma_length.get();
  REQUIRE(reqs.front().v.payload_len == kMtu);  // the capture's path MTU
  std::vector<Captured> first_message;
  for (const auto& c : reqs) {
    first_message.push_back(c);
    if (c.v.op().any(wire::kOpLast)) break;
  }
  REQUIRE(first_message.back().v.op().any(wire::kOpLast));
  // The views of the copies point into their own bytes again.
  for (auto& c : first_message) REQUIRE(wire::decode(c.bytes, c.v) == wire::DecodeError::kOk);

  Replay r(LossRecovery::kGoBackN, first_psn, msg_len + 8192);
  seed(r.mem);
  WriteRules rules(first_psn, msg_va, r.mem.size());
  rules.image = r.mem;
  const uint64_t va_shift = reinterpret_cast<uint64_t>(r.mem.data()) - msg_va;
  r.play(first_message, va_shift, rules);
  REQUIRE(rules.msn == 1);
  REQUIRE(r.mem == rules.image);

  struct Read {
    uint64_t offset;
    uint32_t len;
  };
  uint32_t psn = rules.epsn, msn = rules.msn;
  for (const Read rd : {Read{0, msg_len}, Read{100, 2500}, Read{msg_len + 7, 1000}}) {
    INFO("READ of " << rd.len << " bytes at offset " << rd.offset << ", PSN " << psn);
    r.read_request(psn, msg_va + va_shift + rd.offset, rd.len);
    r.engine->run_for(ms(1));
    const auto resp = r.take_sent();
    const uint32_t n = (rd.len + kMtu - 1) / kMtu;
    REQUIRE(resp.size() == n);
    std::vector<uint8_t> payload;
    for (uint32_t i = 0; i < n; i++) {
      const auto& v = resp[i].v;
      INFO("response " << i << ": opcode 0x" << std::hex << int(v.opcode) << std::dec << " PSN " << v.bth().psn());
      using namespace wire::op;
      const uint8_t want = n == 1       ? kReadRespOnly
                           : i == 0     ? kReadRespFirst
                           : i + 1 == n ? kReadRespLast
                                        : kReadRespMiddle;
      CHECK(v.opcode == want);
      CHECK(v.bth().psn() == wire::psn_add(psn, i));
      CHECK(v.payload_len == (i + 1 < n ? kMtu : rd.len - kMtu * (n - 1)));
      if (v.op().any(wire::kOpLast)) CHECK(v.aeth().msn() == msn + 1);
      else if (v.op().any(wire::kOpFirst)) CHECK(v.aeth().msn() == msn);
      if (v.op().any(wire::kOpFirst | wire::kOpLast))
        CHECK(wire::aeth_kind(v.aeth().syndrome()) == wire::AethKind::kAck);
      payload.insert(payload.end(), v.payload().begin(), v.payload().end());
    }
    const auto at = rules.image.begin() + ptrdiff_t(rd.offset);
    CHECK(std::equal(payload.begin(), payload.end(), at, at + rd.len));
    psn = wire::psn_add(psn, n);
    msn++;
  }
  CHECK(r.nic->counters()[NicCounters::duplicate_request] == 0);
}
