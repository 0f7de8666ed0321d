// A mixed transfer between two emulated NICs, captured on the link and
// handed to tshark and scapy: every packet our transport sends must decode
// without errors, with our ICRC.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "common/wire/packet.h"
#include "tests/nic/workload.h"
#include "tests/oracle/oracle_run.h"
#include "tests/support/pcap_file.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

std::vector<OracleFrame> describe(const std::vector<CapturedFrame>& captured, int& roce) {
  std::vector<OracleFrame> out;
  roce = 0;
  for (const auto& c : captured) {
    OracleFrame o;
    o.bytes = c.bytes;
    wire::PacketView v;
    REQUIRE(wire::decode(c.bytes, v) == wire::DecodeError::kOk);
    if (!v.is_roce) {
      o.kind = FrameKind::kArp;
      out.push_back(o);
      continue;
    }
    roce++;
    o.kind = FrameKind::kRoce;
    o.path.ipv6 = v.is_ipv6();
    o.path.vlan = v.has_vlan;
    const wire::Bth& b = v.bth();
    o.fields.opcode = b.opcode;
    o.fields.se = b.se();
    o.fields.mig_req = b.mig_req();
    o.fields.pkey = b.pkey.get();
    o.fields.fecn = b.fecn();
    o.fields.becn = b.becn();
    o.fields.dest_qp = b.dest_qp();
    o.fields.ack_req = b.ack_req();
    o.fields.psn = b.psn();
    o.payload_len = v.payload_len;
    o.expect = {FieldExpect::num("infiniband.bth.opcode", b.opcode), FieldExpect::num("infiniband.bth.psn", b.psn()),
                FieldExpect::num("infiniband.bth.destqp", b.dest_qp())};
    out.push_back(o);
  }
  return out;
}

void check_capture(const std::string& path, bool ipv6) {
  const auto captured = read_capture(path);
  int roce = 0;
  const auto frames = describe(captured, roce);
  REQUIRE(roce > 200);
  const auto run = run_tshark(path, {"infiniband.bth.opcode", "infiniband.bth.psn", "infiniband.bth.destqp"});
  INFO(run.stderr_text);
  REQUIRE(run.status == 0);
  REQUIRE(run.frames.size() == captured.size());
  const auto problems = tshark_problems(frames, run);
  for (const auto& p : problems) INFO(p);
  CHECK(problems.empty());
  const auto sc = run_scapy(path, frames, path + ".expect");
  INFO(sc.output);
  CHECK(sc.status == 0);
  CHECK(sc.problems.empty());
  CHECK((ipv6 ? sc.checked_ipv6 : sc.checked_ipv4) == roce);
}

}  // namespace

TEST_CASE("A captured mixed transfer under loss decodes in tshark and scapy agrees on every ICRC", "[oracle][nic]") {
  const bool ipv6 = GENERATE(false, true);
  const auto mode = GENERATE(nic::LossRecovery::kGoBackN, nic::LossRecovery::kSelectiveRepeat);
  INFO((ipv6 ? "IPv6" : "IPv4") << (mode == nic::LossRecovery::kGoBackN ? " go-back-N" : " selective repeat"));
  TwoNics f(21, mode, LinkParams{}, 16384, ipv6);
  const std::string path = std::string(ROCEMU_ORACLE_OUT) + "/nic-capture-" + (ipv6 ? "v6" : "v4") +
                           (mode == nic::LossRecovery::kGoBackN ? "-gbn" : "-sr") + ".pcapng";
  REQUIRE(f.engine->capture_link(*f.link, path).ok());
  FaultConfig fc;
  fc.loss = 0.02;
  f.link->set_faults(0, fc);
  f.link->set_faults(1, fc);
  WorkloadSpec spec;
  spec.writes = 6;
  spec.sends = 6;
  spec.reads = 6;
  spec.atomics = 6;
  spec.max_len = 20000;
  const auto r = run_rc_workload(f, spec);
  REQUIRE(r.failure == "");
  f.engine->flush_captures();
  check_capture(path, ipv6);
}

TEST_CASE("SEND with invalidate of a memory window's key: tshark decodes the IETH the NIC sent, the RETH names the window",
          "[oracle][nic][mw]") {
  TwoNics f(22);
  const std::string path = std::string(ROCEMU_ORACLE_OUT) + "/nic-capture-send-inv.pcapng";
  REQUIRE(f.engine->capture_link(*f.link, path).ok());
  const RcPair p = connect_rc(f);
  std::vector<uint8_t> src(8192, 0x3c), mem(8192, 0), rbuf(8192, 0);
  const uint32_t src_key = f.h1->reg_mr(src.data(), src.size(), kAccessAll);
  ibv_mr mr{};
  mr.lkey = f.h2->reg_mr(mem.data(), mem.size(), kAccessAll | IBV_ACCESS_MW_BIND);
  const uint32_t rbuf_key = f.h2->reg_mr(rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mw mw{};
  mw.type = IBV_MW_TYPE_2;
  REQUIRE(f.n2->alloc_mw(f.h2->context(), f.h2->pd(), IBV_MW_TYPE_2, mw.handle, mw.rkey) == 0);
  // Binds the window on h2's QP with a new key byte; returns the key.
  auto bind = [&] {
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = &mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw.rkey);
    wr.bind_mw.bind_info = {&mr, reinterpret_cast<uint64_t>(mem.data()), mem.size(),
                            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
    REQUIRE(f.h2->post_send(p.q2, &wr) == 0);
    const auto wc = wait_cqes(f, *f.h2, p.cq2, 1);
    REQUIRE(wc.size() == 1);
    REQUIRE(wc[0].status == IBV_WC_SUCCESS);
    return mw.rkey = wr.bind_mw.rkey;
  };
  // From h1: a WRITE through the window, then a SEND with invalidate of
  // its key of `len` bytes (one packet, or first/middle/last at MTU 1024).
  auto write_then_send_inv = [&](uint32_t key, uint32_t len) {
    ibv_sge rs = sge(rbuf.data(), uint32_t(rbuf.size()), rbuf_key);
    ibv_recv_wr rw{};
    rw.sg_list = &rs;
    rw.num_sge = 1;
    REQUIRE(f.h2->post_recv(p.q2, &rw) == 0);
    ibv_sge s = sge(src.data(), len, src_key);
    ibv_send_wr w = rdma_wr(&s, reinterpret_cast<uint64_t>(mem.data()), key, 1);
    ibv_send_wr inv{};
    inv.sg_list = &s;
    inv.num_sge = 1;
    inv.opcode = IBV_WR_SEND_WITH_INV;
    inv.send_flags = IBV_SEND_SIGNALED;
    inv.invalidate_rkey = key;
    w.next = &inv;
    REQUIRE(f.h1->post_send(p.q1, &w) == 0);
    const auto sent = wait_cqes(f, *f.h1, p.cq1, 2);
    REQUIRE(sent.size() == 2);
    CHECK(sent[0].status == IBV_WC_SUCCESS);
    CHECK(sent[1].status == IBV_WC_SUCCESS);
    const auto got = wait_cqes(f, *f.h2, p.cq2, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].status == IBV_WC_SUCCESS);
    CHECK((got[0].wc_flags & IBV_WC_WITH_INV) != 0);
    CHECK(got[0].invalidated_rkey == key);
  };
  const uint32_t key1 = bind();
  write_then_send_inv(key1, 100);
  const uint32_t key2 = bind();  // free again after the invalidation: bound anew
  write_then_send_inv(key2, 3000);
  f.engine->flush_captures();

  const auto run = run_tshark(path, {"infiniband.bth.opcode", "infiniband.ieth", "infiniband.reth.r_key"});
  INFO(run.stderr_text);
  REQUIRE(run.status == 0);
  auto key_hex = [](uint32_t k) {
    char b[9];
    std::snprintf(b, sizeof b, "%08x", k);
    return std::string(b);
  };
  // Each frame's opcode -> the IETH or RETH rkeys tshark read in frames of it.
  std::map<int, std::vector<std::string>> ieth;
  std::vector<uint32_t> reth_keys;
  for (const TsharkFrame& fr : run.frames) {
    CHECK_FALSE(fr.malformed);
    CHECK(fr.errors.empty());
    if (fr.values[0].empty()) continue;  // ARP
    const int op = std::stoi(fr.values[0][0], nullptr, 0);
    for (const std::string& v : fr.values[1]) ieth[op].push_back(v);
    for (const std::string& v : fr.values[2]) reth_keys.push_back(uint32_t(std::stoul(v, nullptr, 0)));
  }
  // RC SEND_ONLY_WITH_INVALIDATE (0x17) for the one-packet send, the IETH
  // on SEND_LAST_WITH_INVALIDATE (0x16) of the three-packet one, on no
  // other opcode (the link's capture has each frame once per direction
  // it was seen in: the values repeat).
  const auto only = [&](int op, uint32_t key) {
    const auto& v = ieth[op];
    return !v.empty() && std::all_of(v.begin(), v.end(), [&](const std::string& s) { return s == key_hex(key); });
  };
  CHECK(only(wire::op::kSendOnlyInv, key1));
  CHECK(only(wire::op::kSendLastInv, key2));
  size_t with_ieth = 0;
  for (const auto& [op, v] : ieth) with_ieth += v.empty() ? 0 : 1;
  CHECK(with_ieth == 2);
  CHECK(wire::op::kSendOnlyInv == 0x17);
  CHECK(wire::op::kSendLastInv == 0x16);
  CHECK(std::count(reth_keys.begin(), reth_keys.end(), key1) >= 1);
  CHECK(std::count(reth_keys.begin(), reth_keys.end(), key2) >= 1);
}

TEST_CASE("ATOMIC WRITE as the NIC sends it: tshark finds opcode 29 and the IBA layout, scapy the ICRC; the answer "
          "is an empty READ RESPONSE ONLY",
          "[oracle][nic][atomic_write]") {
  const bool ipv6 = GENERATE(false, true);
  INFO((ipv6 ? "IPv6" : "IPv4"));
  TwoNics f(23, nic::LossRecovery::kGoBackN, LinkParams{}, 16384, ipv6);
  const std::string path =
      std::string(ROCEMU_ORACLE_OUT) + "/nic-capture-atomic-write-" + (ipv6 ? "v6" : "v4") + ".pcapng";
  REQUIRE(f.engine->capture_link(*f.link, path).ok());
  const RcPair p = connect_rc(f);
  std::vector<uint8_t> mem(4096, 0);
  const uint32_t rkey = f.h2->reg_mr(mem.data(), mem.size(), kAccessRw);
  // Three, each its own value and word.
  constexpr int kWrites = 3;
  const uint64_t values[kWrites] = {0x0102030405060708ull, 0xfedcba9876543210ull, 0x00000000ffffffffull};
  std::vector<ibv_sge> sges(kWrites);
  std::vector<ibv_send_wr> wrs(kWrites);
  for (int i = 0; i < kWrites; i++) {
    sges[size_t(i)] = {reinterpret_cast<uint64_t>(&values[i]), 8, 0};
    wrs[size_t(i)].wr_id = uint64_t(i);
    wrs[size_t(i)].sg_list = &sges[size_t(i)];
    wrs[size_t(i)].num_sge = 1;
    wrs[size_t(i)].opcode = IBV_WR_ATOMIC_WRITE;
    wrs[size_t(i)].send_flags = IBV_SEND_SIGNALED;
    wrs[size_t(i)].wr.rdma.remote_addr = reinterpret_cast<uint64_t>(mem.data()) + 64 * (i + 1);
    wrs[size_t(i)].wr.rdma.rkey = rkey;
    if (i > 0) wrs[size_t(i) - 1].next = &wrs[size_t(i)];
  }
  REQUIRE(f.h1->post_send(p.q1, wrs.data()) == 0);
  const auto wc = wait_cqes(f, *f.h1, p.cq1, kWrites);
  REQUIRE(wc.size() == size_t(kWrites));
  for (const ibv_wc& w : wc) CHECK((w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_ATOMIC_WRITE));
  f.engine->flush_captures();

  const auto captured = read_capture(path);
  int roce = 0;
  auto frames = describe(captured, roce);
  // Each request: BTH, then (Wireshark 4.0 not knowing 0x1D) one blob that
  // must be the RETH in network order, the 8 bytes as they were in memory,
  // the ICRC. Each answer: RC_RDMA_READ_RESPONSE_ONLY, an ACK in its AETH,
  // no payload.
  auto hex = [](const uint8_t* b, size_t n) {
    std::string s;
    char x[3];
    for (size_t i = 0; i < n; i++) {
      std::snprintf(x, sizeof x, "%02x", b[i]);
      s += x;
    }
    return s;
  };
  int requests = 0, answers = 0;
  for (OracleFrame& o : frames) {
    if (o.kind != FrameKind::kRoce) continue;
    if (o.fields.opcode == 0x1d) {
      // Which request it is, by its word (a frame may be in the capture
      // more than once); the expectation itself comes from the WR.
      requests++;
      wire::PacketView pv;
      REQUIRE(wire::decode(o.bytes, pv) == wire::DecodeError::kOk);
      size_t k = 0;
      while (k + 1 < size_t(kWrites) && wrs[k].wr.rdma.remote_addr != pv.reth().va.get()) k++;
      const uint64_t va = wrs[k].wr.rdma.remote_addr;
      uint8_t reth[16];
      for (int b = 0; b < 8; b++) reth[b] = uint8_t(va >> (56 - 8 * b));
      for (int b = 0; b < 4; b++) reth[8 + b] = uint8_t(rkey >> (24 - 8 * b));
      for (int b = 0; b < 4; b++) reth[12 + b] = uint8_t(8u >> (24 - 8 * b));
      const std::string blob = hex(reth, 16) + hex(reinterpret_cast<const uint8_t*>(&values[k]), 8) +
                               hex(o.bytes.data() + o.bytes.size() - 4, 4);
      o.expect.push_back(FieldExpect::str("infiniband.vendor", blob).at(1));
      o.expect.push_back(FieldExpect::num("infiniband.bth.a", 1));
      CHECK(o.payload_len == 8);
    } else if (o.fields.opcode == wire::op::kReadRespOnly) {
      answers++;
      o.expect.push_back(FieldExpect::num("infiniband.aeth.syndrome", wire::aeth_ack()));
      CHECK(o.payload_len == 0);
    }
  }
  CHECK(requests >= kWrites);
  CHECK(answers >= kWrites);
  const auto run = run_tshark(path, oracle_field_names(frames));
  INFO(run.stderr_text);
  REQUIRE(run.status == 0);
  REQUIRE(run.frames.size() == captured.size());
  const auto problems = tshark_problems(frames, run);
  for (const auto& pr : problems) INFO(pr);
  CHECK(problems.empty());
  const auto sc = run_scapy(path, frames, path + ".expect");
  INFO(sc.output);
  CHECK(sc.status == 0);
  CHECK(sc.problems.empty());
  CHECK((ipv6 ? sc.checked_ipv6 : sc.checked_ipv4) == roce);
  // And the words landed.
  for (int i = 0; i < kWrites; i++) CHECK(std::memcmp(mem.data() + 64 * (i + 1), &values[i], 8) == 0);
}

TEST_CASE("A captured XRC exchange: tshark decodes every frame without error, each request's XRCETH names the SRQ",
          "[oracle][nic][xrc]") {
  TwoNics f(23);
  const std::string path = std::string(ROCEMU_ORACLE_OUT) + "/nic-capture-xrc.pcapng";
  REQUIRE(f.engine->capture_link(*f.link, path).ok());
  // h1: an initiator; h2: a domain, a target and an SRQ; then a second
  // initiator/target pair whose request names no SRQ.
  auto* scq = f.h1->create_cq(64);
  auto* rcq = f.h2->create_cq(64);
  const uint32_t xrcd = f.h2->open_xrcd();
  auto* srq = f.h2->create_xrc_srq(xrcd, rcq, 16);
  REQUIRE(srq != nullptr);
  const ibv_qp_cap cap{16, 0, 1, 0, 0};
  auto* ini = f.h1->create_xrc_send_qp(scq, cap);
  auto* tgt = f.h2->create_xrc_recv_qp(xrcd);
  REQUIRE(nic::SimHost::connect(*f.h1, ini, *f.h2, tgt) == 0);
  std::vector<uint8_t> src(4096, 0x21), mem(8192, 0), rbuf(8192, 0);
  uint64_t counter = 5;
  const uint32_t src_key = f.h1->reg_mr(src.data(), src.size(), kAccessAll);
  const uint32_t mem_key = f.h2->reg_mr(mem.data(), mem.size(), kAccessAll);
  const uint32_t rbuf_key = f.h2->reg_mr(rbuf.data(), rbuf.size(), kAccessAll);
  const uint32_t ctr_key = f.h2->reg_mr(&counter, 8, kAccessAll);
  ibv_sge rs = sge(rbuf.data(), uint32_t(rbuf.size()), rbuf_key);
  ibv_recv_wr rw{};
  rw.sg_list = &rs;
  rw.num_sge = 1;
  REQUIRE(f.h2->post_srq_recv(srq, &rw) == 0);
  ibv_sge s = sge(src.data(), 3000, src_key);  // three packets: FIRST, MIDDLE, LAST
  ibv_send_wr send{};
  send.sg_list = &s;
  send.num_sge = 1;
  send.opcode = IBV_WR_SEND;
  send.send_flags = IBV_SEND_SIGNALED;
  send.qp_type.xrc.remote_srqn = srq->srqn;
  ibv_send_wr write = rdma_wr(&s, reinterpret_cast<uint64_t>(mem.data()), mem_key, 2);
  write.qp_type.xrc.remote_srqn = srq->srqn;
  ibv_sge back = sge(src.data() + 3000, 1000, src_key);
  ibv_send_wr read = rdma_wr(&back, reinterpret_cast<uint64_t>(mem.data()), mem_key, 3, IBV_WR_RDMA_READ);
  read.qp_type.xrc.remote_srqn = srq->srqn;
  ibv_sge orig = sge(src.data() + 4088, 8, src_key);
  ibv_send_wr add{};
  add.sg_list = &orig;
  add.num_sge = 1;
  add.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  add.send_flags = IBV_SEND_SIGNALED;
  add.wr.atomic.remote_addr = reinterpret_cast<uint64_t>(&counter);
  add.wr.atomic.compare_add = 1;
  add.wr.atomic.rkey = ctr_key;
  add.qp_type.xrc.remote_srqn = srq->srqn;
  send.next = &write;
  write.next = &read;
  read.next = &add;
  REQUIRE(f.h1->post_send(ini, &send) == 0);
  const auto wc = wait_cqes(f, *f.h1, scq, 4);
  REQUIRE(wc.size() == 4);
  for (const auto& c : wc) CHECK(c.status == IBV_WC_SUCCESS);
  CHECK(counter == 6);
  // A request naming no SRQ: NAK remote access error.
  auto* ini2 = f.h1->create_xrc_send_qp(scq, cap);
  auto* tgt2 = f.h2->create_xrc_recv_qp(xrcd);
  REQUIRE(nic::SimHost::connect(*f.h1, ini2, *f.h2, tgt2) == 0);
  ibv_send_wr stray = send;
  stray.next = nullptr;
  stray.qp_type.xrc.remote_srqn = 0x654321;
  REQUIRE(f.h1->post_send(ini2, &stray) == 0);
  const auto bad = wait_cqes(f, *f.h1, scq, 1);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].status == IBV_WC_REM_ACCESS_ERR);
  f.engine->flush_captures();

  const auto captured = read_capture(path);
  const auto run = run_tshark(path, {"infiniband.bth.opcode", "infiniband.vendor"});
  INFO(run.stderr_text);
  REQUIRE(run.status == 0);
  REQUIRE(run.frames.size() == captured.size());
  std::map<int, int> opcodes;  // XRC opcode -> frames
  int xrceth_ok = 0, nak_access = 0;
  for (size_t i = 0; i < captured.size(); i++) {
    const TsharkFrame& fr = run.frames[i];
    CHECK_FALSE(fr.malformed);
    CHECK(fr.errors.empty());
    wire::PacketView v;
    REQUIRE(wire::decode(captured[i].bytes, v) == wire::DecodeError::kOk);
    if (!v.is_roce) continue;
    REQUIRE(fr.values[0].size() == 1);
    const int op = std::stoi(fr.values[0][0], nullptr, 0);
    CHECK(op == v.opcode);
    CHECK(wire::opcode_transport(v.opcode) == wire::Transport::kXrc);  // nothing but XRC on this link
    CHECK(v.icrc_ok());
    opcodes[op]++;
    // What follows the BTH, as tshark shows it (Wireshark 4.0: one blob).
    REQUIRE(fr.values[1].size() == 2);
    const std::string& blob = fr.values[1][1];
    char want[9];
    if (v.op().any(wire::kOpRequest)) {
      std::snprintf(want, sizeof want, "%08x", v.bth().dest_qp() == tgt->qpn ? srq->srqn : 0x654321u);
      xrceth_ok += blob.compare(0, 8, want) == 0;
    } else if (v.op().has(wire::kExtAeth) && v.aeth().syndrome() == wire::aeth_nak(wire::NakCode::kRemoteAccessError)) {
      nak_access += blob.compare(0, 2, "62") == 0;
    }
  }
  using namespace wire::op;
  for (uint8_t o : {kSendFirst, kSendMiddle, kSendLast, kWriteFirst, kWriteMiddle, kWriteLast, kReadRequest,
                    kReadRespOnly, kAck, kFetchAdd, kAtomicAck}) {
    INFO("opcode " << int(xrc(o)));
    CHECK(opcodes[xrc(o)] > 0);
  }
  int requests = 0;
  for (const auto& [op, n] : opcodes)
    if (wire::opcode_info(uint8_t(op)).any(wire::kOpRequest)) requests += n;
  CHECK(xrceth_ok == requests);
  CHECK(nak_access >= 1);
}

namespace {

std::string shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

TEST_CASE("A port capture keeps every header, flags each frame's direction and stamps it when it crossed",
          "[oracle][nic]") {
  TwoNics f(23);
  const std::string path = std::string(ROCEMU_ORACLE_OUT) + "/nic-port-capture.pcapng";
  CaptureOptions opts;
  opts.snaplen = 128;
  auto id = f.engine->capture_port(*f.n1, 0, path, opts);
  REQUIRE(id.ok());
  WorkloadSpec spec;
  spec.writes = 8;
  spec.reads = 4;
  spec.max_len = 60000;
  const auto r = run_rc_workload(f, spec);
  REQUIRE(r.failure == "");
  REQUIRE(f.engine->stop_capture(id.value()));

  const std::string cmd = "tshark -n -r " + path +
                          " -T fields -E separator=, -e frame.interface_id -e frame.packet_flags_direction"
                          " -e frame.time_epoch -e frame.cap_len -e frame.len -e infiniband.bth.opcode 2>/dev/null";
  const std::string out = shell(cmd);
  INFO(cmd << "\n" << out.substr(0, 4000));
  std::stringstream lines(out);
  std::string line;
  // interface 0: what h1 sends (outbound), 1: what it receives (inbound)
  std::map<int, std::vector<std::string>> times;
  int frames = 0, long_frames = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> v;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) v.push_back(x);
    REQUIRE(v.size() >= 5);
    const int iface = std::stoi(v[0]);
    CHECK(std::stoul(v[1], nullptr, 0) == (iface == 0 ? 2u : 1u));  // 2 outbound, 1 inbound
    CHECK(std::stoi(v[3]) <= 128);
    if (std::stoi(v[4]) > 128) long_frames++;
    if (std::stoi(v[4]) > 100) CHECK((v.size() == 6 && !v[5].empty()));  // the BTH is decoded
    times[iface].push_back(v[2]);
    frames++;
  }
  REQUIRE(frames > 100);
  CHECK(long_frames > 50);
  REQUIRE(times.size() == 2);
  for (auto& [iface, t] : times) {
    INFO("interface " << iface);
    // Each frame has its own time (at 100 Gbit/s no two cross within a
    // nanosecond), in the order they crossed.
    std::vector<long double> ts;
    for (const auto& s : t) ts.push_back(std::stold(s));
    CHECK(std::is_sorted(ts.begin(), ts.end()));
    CHECK(std::adjacent_find(ts.begin(), ts.end()) == ts.end());
  }
}
