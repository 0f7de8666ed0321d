#include "tests/integration/incast.h"

#include <algorithm>
#include <sstream>

namespace rocemu::test {
namespace {

constexpr int kIncastAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = uint8_t(x);
  }
  return v;
}

}  // namespace

double IncastResult::goodput_gbps() const {
  const double secs = to_seconds(completion());
  return secs > 0 ? double(bytes) * 8 / secs / 1e9 : 0;
}

IncastResult run_incast(Star& s, const IncastSpec& spec) {
  IncastResult res;
  std::ostringstream err;
  const int n = spec.senders;
  nic::SimHost& rx = s.host(n);
  const size_t per_sender = size_t(spec.messages) * spec.message_len;

  // Memory: each sender's source, one destination region per sender. Fixed
  // I/O addresses keep the packets the same from run to run.
  std::vector<std::vector<uint8_t>> src;
  for (int i = 0; i < n; i++) src.push_back(pattern(per_sender, uint64_t(i) + 1));
  std::vector<uint8_t> dst(per_sender * size_t(n), 0);
  constexpr uint64_t kDstIova = 0x7000'0000'0000ull;
  constexpr uint64_t kSrcIova = 0x1000'0000'0000ull;
  const uint32_t dst_key = rx.reg_mr(dst.data(), dst.size(), kIncastAccess, nullptr, kDstIova);
  if (dst_key == 0) {
    res.failure = "reg_mr of the destination failed";
    return res;
  }

  struct Sender {
    nic::SimHost::Cq* cq = nullptr;
    nic::SimHost::Qp* qp = nullptr;
    nic::SimHost::Qp* peer = nullptr;
    uint32_t lkey = 0;
    std::vector<ibv_wc> wcs;
  };
  std::vector<Sender> senders(static_cast<size_t>(n));
  auto* rx_cq = rx.create_cq(1024);
  const ibv_qp_cap cap{uint32_t(spec.messages + 4), 4, 1, 1, 0};
  for (int i = 0; i < n; i++) {
    Sender& sd = senders[size_t(i)];
    nic::SimHost& h = s.host(i);
    sd.cq = h.create_cq(1024);
    sd.qp = h.create_qp(nic::QpType::kRc, sd.cq, sd.cq, cap);
    sd.peer = rx.create_qp(nic::QpType::kRc, rx_cq, rx_cq, cap);
    sd.lkey = h.reg_mr(src[size_t(i)].data(), per_sender, kIncastAccess, nullptr, kSrcIova + uint64_t(i) * 0x1'0000'0000ull);
    if (sd.qp == nullptr || sd.peer == nullptr || sd.lkey == 0 ||
        nic::SimHost::connect(h, sd.qp, rx, sd.peer, spec.connect) != 0) {
      res.failure = "QP setup failed";
      return res;
    }
  }
  // Both ends of every QP know their gateway's MAC before the clock starts.
  const bool resolved = s.engine->run_until(
      [&] {
        for (const Sender& sd : senders)
          if (!sd.qp->nic_qp->neighbor_ok || !sd.peer->nic_qp->neighbor_ok) return false;
        return true;
      },
      s.now() + ms(5));
  if (!resolved) {
    res.failure = "ARP did not resolve the gateways";
    return res;
  }

  res.posted = s.now();
  for (int i = 0; i < n; i++) {
    Sender& sd = senders[size_t(i)];
    for (int k = 0; k < spec.messages; k++) {
      const size_t off = size_t(k) * spec.message_len;
      ibv_sge sg{kSrcIova + uint64_t(i) * 0x1'0000'0000ull + off, spec.message_len, sd.lkey};
      ibv_send_wr wr{};
      wr.wr_id = uint64_t(k);
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.sg_list = &sg;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = kDstIova + size_t(i) * per_sender + off;
      wr.wr.rdma.rkey = dst_key;
      if (s.host(i).post_send(sd.qp, &wr) != 0) {
        res.failure = "post_send failed";
        return res;
      }
    }
  }
  res.sender_done.assign(size_t(n), Time{0});
  std::string premature;
  res.finished = s.engine->run_until(
      [&] {
        bool all = true;
        for (int i = 0; i < n; i++) {
          Sender& sd = senders[size_t(i)];
          ibv_wc wc[16];
          int got;
          while ((got = s.host(i).poll(sd.cq, 16, wc)) > 0) {
            for (int c = 0; c < got; c++) {
              // RC: a successful WRITE completion means the responder has
              // placed the data. Check it at that moment.
              const ibv_wc& w = wc[c];
              const size_t off = size_t(i) * per_sender + size_t(w.wr_id) * spec.message_len;
              if (w.status == IBV_WC_SUCCESS && w.wr_id < uint64_t(spec.messages) && premature.empty() &&
                  !std::equal(dst.begin() + long(off), dst.begin() + long(off + spec.message_len),
                              src[size_t(i)].begin() + long(size_t(w.wr_id) * spec.message_len))) {
                std::ostringstream p;
                p << "sender " << i << " WRITE " << w.wr_id << " completed at "
                  << to_seconds(s.now() - res.posted) * 1e6 << " us before its data had arrived";
                premature = p.str();
              }
              sd.wcs.push_back(w);
            }
            res.sender_done[size_t(i)] = s.now();
          }
          all = all && sd.wcs.size() >= size_t(spec.messages);
        }
        if (spec.observe) spec.observe();
        return all;
      },
      res.posted + spec.limit);
  res.done = *std::max_element(res.sender_done.begin(), res.sender_done.end());
  if (!premature.empty()) {
    res.failure = premature;
    return res;
  }

  for (int i = 0; i < n; i++) {
    const Sender& sd = senders[size_t(i)];
    for (size_t k = 0; k < sd.wcs.size(); k++) {
      const ibv_wc& w = sd.wcs[k];
      if (w.status != IBV_WC_SUCCESS || w.wr_id != k || w.opcode != IBV_WC_RDMA_WRITE) {
        err << "sender " << i << " completion " << k << ": wr_id " << w.wr_id << " status "
            << nic::wc_status_name(w.status);
        res.failure = err.str();
        return res;
      }
    }
    if (sd.wcs.size() != size_t(spec.messages)) {
      err << "sender " << i << ": " << sd.wcs.size() << "/" << spec.messages << " completions by the deadline";
      res.failure = err.str();
      return res;
    }
  }
  // Every byte, and nothing else.
  for (int i = 0; i < n; i++) {
    const uint8_t* got = dst.data() + size_t(i) * per_sender;
    const auto& want = src[size_t(i)];
    const auto diff = std::mismatch(want.begin(), want.end(), got);
    if (diff.first != want.end()) {
      err << "sender " << i << ": destination differs at byte " << (diff.first - want.begin());
      res.failure = err.str();
      return res;
    }
  }
  res.bytes = per_sender * size_t(n);
  return res;
}

}  // namespace rocemu::test
