// DCQCN in real time with unmodified perftest: two ib_write_bw clients
// into one host behind a slower port make the switch mark, the receiver
// send CNPs and both senders handle them.
#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

const std::string kIncast = std::string(ROCEMU_SOURCE_DIR) + "/tests/e2e/data/incast_2g.yaml";

}  // namespace

TEST_CASE("Two ib_write_bw into one host: CNPs flow and the senders handle them", "[e2e][dcqcn]") {
  // Each runs 3 s (-D 3), so they overlap for most of it whatever the
  // start-up order: with a fixed count of messages the first could finish
  // before the second began.
  Fabric f(kIncast);
  const int p1 = pick_port(), p2 = pick_port();
  auto server = [&](int port) {
    return f.exec("h2", {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-x", "3", "-s", "65536", "-D", "3", "-p",
                         std::to_string(port)});
  };
  auto client = [&](const std::string& node, int port) {
    return f.exec(node, {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-x", "3", "-s", "65536", "-D", "3", "-p",
                         std::to_string(port), "127.0.0.1"});
  };
  Process s1 = server(p1), s2 = server(p2);
  REQUIRE(wait_until([&] { return tcp_listening(p1) && tcp_listening(p2); }, std::chrono::seconds(30), {&s1, &s2}));
  Process c1 = client("h1", p1), c3 = client("h3", p2);
  const int rc1 = finish(c1, std::chrono::seconds(120)), rc3 = finish(c3, std::chrono::seconds(120));
  finish(s1, std::chrono::seconds(30));
  finish(s2, std::chrono::seconds(30));
  INFO("h1:\n" << c1.output << "\nh3:\n" << c3.output);
  REQUIRE(rc1 == 0);
  REQUIRE(rc3 == 0);
  auto c = f.counters();
  INFO("marked " << c["sw1/swp2 tx-ecn-stats.ecn-marked-packets"] << ", h2 np_cnp_sent " << c["h2 np_cnp_sent"]
                 << ", h1 rp_cnp_handled " << c["h1 rp_cnp_handled"] << ", h3 rp_cnp_handled "
                 << c["h3 rp_cnp_handled"]);
  CHECK(c["sw1/swp2 tx-ecn-stats.ecn-marked-packets"] > 0);
  CHECK(c["h2 np_cnp_sent"] > 0);
  // Every CNP reaches its sender (the last few may be on their way as the
  // counters are read).
  const uint64_t handled = c["h1 rp_cnp_handled"] + c["h3 rp_cnp_handled"];
  CHECK(handled <= c["h2 np_cnp_sent"]);
  CHECK(double(handled) >= 0.99 * double(c["h2 np_cnp_sent"]));
  CHECK(c["h1 rp_cnp_handled"] > 0);
  CHECK(c["h3 rp_cnp_handled"] > 0);
}
