#include "tests/oracle/oracle_run.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace rocemu::test {
namespace {

// Severity levels as Wireshark encodes them (epan/proto.h PI_*).
constexpr uint64_t kPiWarn = 0x00600000, kPiError = 0x00800000;

// The heuristic sub-dissectors tshark tries on a RoCE payload. Our
// payloads are arbitrary bytes; RPC-over-RDMA or "Ethernet over IB" then
// claim some of them and throw, which says nothing about our headers.
constexpr const char* kPayloadHeuristics[] = {
    "smcr_infiniband", "smb_direct_infiniband", "rpcrdma_infiniband", "nvme_rdma", "lnet_ib",
    "iser_infiniband", "eth_over_ib",           "mellanox_eoib",      "sdp_infiniband", "fc_infiniband"};

}  // namespace

int run_command(const std::string& cmd, std::string& out) {
  out.clear();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run: " + cmd);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// tshark prints integers in decimal or as 0x-prefixed hex, booleans as 0/1
// (True/False in later versions).
bool parse_number(const std::string& s, uint64_t& v) {
  if (s == "True") return v = 1, true;
  if (s == "False") return v = 0, true;
  if (s.empty()) return false;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  char* end = nullptr;
  v = std::strtoull(s.c_str() + (hex ? 2 : 0), &end, hex ? 16 : 10);
  return end && *end == '\0';
}

bool matches(const FieldExpect& e, const std::string& got) {
  if (!e.number) return got == e.text;
  uint64_t v;
  return parse_number(got, v) && v == *e.number;
}

std::string shorten(std::string s) {
  constexpr size_t kMax = 72;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...(" + std::to_string(s.size()) + " chars)";
  return s;
}

std::string want(const FieldExpect& e) {
  if (!e.number) return shorten(e.text);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%llu (0x%llx)", static_cast<unsigned long long>(*e.number),
                static_cast<unsigned long long>(*e.number));
  return buf;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "|") + x;
  return s.empty() ? "(absent)" : shorten(s);
}

}  // namespace

TsharkRun run_tshark(const std::string& pcap, const std::vector<std::string>& fields,
                     bool ignore_ipv6_zero_udp_checksum) {
  TsharkRun r;
  r.fields = fields;
  const std::string err_path = pcap + ".tshark-stderr";
  // -n: addresses as numbers. ip.check_checksum: verify the IPv4 header
  // checksum. udp.ignore_ipv6_zero_checksum: RoCEv2 sends a zero UDP
  // checksum over IPv6 as over IPv4 (rxe's prepare_udp_hdr; its receive
  // socket sets no_check6_rx; RFC 6935/6936 allow it for tunnel protocols
  // with their own integrity check, here the ICRC). Wireshark flags it as an
  // error unless told so.
  // An empty personal configuration, so a user's Wireshark preferences
  // (disabled protocols, changed ports) do not change what is decoded.
  const std::string profile = pcap + ".tshark-config";
  std::string cmd = "mkdir -p '" + profile + "' && WIRESHARK_CONFIG_DIR='" + profile + "' tshark -n -r '" + pcap +
                    "' -o ip.check_checksum:TRUE -o udp.ignore_ipv6_zero_checksum:" +
                    (ignore_ipv6_zero_udp_checksum ? "TRUE" : "FALSE");
  for (const char* h : kPayloadHeuristics) cmd += std::string(" --disable-heuristic ") + h;
  cmd += " -T fields -E separator=/t -E 'aggregator=|' -E occurrence=a";
  cmd += " -e _ws.malformed -e _ws.expert.severity -e _ws.expert.message";
  for (const auto& f : fields) cmd += " -e " + f;
  cmd += " 2>'" + err_path + "'";
  std::string out;
  r.status = run_command(cmd, out);
  r.stderr_text = slurp(err_path);
  for (const std::string& line : split(out, '\n')) {
    if (line.empty()) continue;
    const auto cols = split(line, '\t');
    TsharkFrame f;
    f.malformed = !cols[0].empty();
    if (cols.size() != fields.size() + 3) {
      f.malformed = true;
      f.errors.push_back("tshark printed " + std::to_string(cols.size()) + " columns");
      r.frames.push_back(std::move(f));
      continue;
    }
    const auto sev = split(cols[1], '|'), msg = split(cols[2], '|');
    for (size_t i = 0; i < sev.size() && !cols[1].empty(); i++) {
      uint64_t s = 0;
      parse_number(sev[i], s);
      const std::string m = i < msg.size() ? msg[i] : "?";
      if (s >= kPiError) f.errors.push_back(m);
      else if (s >= kPiWarn) f.warnings.push_back(m);
    }
    for (size_t i = 0; i < fields.size(); i++) {
      const std::string& c = cols[i + 3];
      f.values.push_back(c.empty() ? std::vector<std::string>{} : split(c, '|'));
    }
    r.frames.push_back(std::move(f));
  }
  return r;
}

std::vector<std::string> tshark_problems(const std::vector<OracleFrame>& frames, const TsharkRun& run) {
  std::vector<std::string> p;
  if (run.status != 0) p.push_back("tshark exited with " + std::to_string(run.status) + ": " + run.stderr_text);
  if (run.frames.size() != frames.size()) {
    p.push_back("tshark decoded " + std::to_string(run.frames.size()) + " frames, we wrote " +
                std::to_string(frames.size()));
    return p;
  }
  for (size_t i = 0; i < frames.size(); i++) {
    const OracleFrame& o = frames[i];
    const TsharkFrame& t = run.frames[i];
    const std::string who = "frame " + std::to_string(i + 1) + " (" + o.name + "): ";
    if (t.malformed) p.push_back(who + "malformed");
    for (const auto& e : t.errors) p.push_back(who + "expert error: " + e);
    if (t.values.size() != run.fields.size()) continue;
    for (const FieldExpect& e : o.expect) {
      size_t col = 0;
      while (col < run.fields.size() && run.fields[col] != e.field) col++;
      if (col == run.fields.size()) {
        p.push_back(who + e.field + " was not asked of tshark");
        continue;
      }
      const auto& got = t.values[col];
      bool ok;
      if (e.occurrence >= 0) {
        ok = size_t(e.occurrence) < got.size() && matches(e, got[size_t(e.occurrence)]);
      } else {
        ok = !got.empty();
        for (const auto& g : got) ok = ok && matches(e, g);
      }
      if (!ok) p.push_back(who + e.field + " = " + join(got) + ", expected " + want(e));
    }
  }
  return p;
}

ScapyRun run_scapy(const std::string& pcap, const std::vector<OracleFrame>& frames, const std::string& expect_path) {
  {
    // index ipv6 vlan opcode se migreq padcount pkey fecn becn dqpn ackreq psn
    std::ofstream out(expect_path, std::ios::trunc);
    for (size_t i = 0; i < frames.size(); i++) {
      const OracleFrame& o = frames[i];
      if (o.kind != FrameKind::kRoce) continue;
      const auto& f = o.fields;
      out << i << ' ' << o.path.ipv6 << ' ' << o.path.vlan << ' ' << int(f.opcode) << ' ' << f.se << ' '
          << f.mig_req << ' ' << int(wire::pad_for(o.payload_len)) << ' ' << f.pkey << ' ' << f.fecn << ' '
          << f.becn << ' ' << f.dest_qp << ' ' << f.ack_req << ' ' << f.psn << '\n';
    }
  }
  ScapyRun r;
  const std::string cmd = std::string("/usr/bin/python3 '") + ROCEMU_ORACLE_DIR + "/scapy_check.py' '" + pcap +
                          "' '" + expect_path + "' 2>&1";
  r.status = run_command(cmd, r.output);
  for (const std::string& line : split(r.output, '\n')) {
    if (line.rfind("FAIL ", 0) == 0) r.problems.push_back(line);
    int a, b, c, d;
    char src[32];
    if (std::sscanf(line.c_str(), "CHECKED ipv4=%d ipv6=%d vlan=%d cnp=%d icrc_ipv6=%31s", &a, &b, &c, &d, src) == 5) {
      r.checked_ipv4 = a;
      r.checked_ipv6 = b;
      r.checked_vlan = c;
      r.checked_cnp = d;
      r.icrc_ipv6_source = src;
    }
  }
  return r;
}

}  // namespace rocemu::test
