#include <catch2/catch.hpp>

#include "common/engine/basic_nodes.h"
#include "common/wire/build.h"
#include "tests/support/eal.h"

using namespace rocemu;

namespace {

// An Ethernet frame of exactly `len` bytes (the engine does not look inside).
std::vector<uint8_t> udp_frame(uint32_t len) {
  std::vector<uint8_t> f(len, 0xab);
  auto* eth = reinterpret_cast<wire::EthHdr*>(f.data());
  eth->dst = *wire::MacAddr::parse("02:00:00:00:00:02");
  eth->src = *wire::MacAddr::parse("02:00:00:00:00:01");
  eth->ether_type.set(0x88b5);  // local experimental
  return f;
}

}  // namespace

TEST_CASE("A 100G link carries 100 Gbit/s of virtual time, with delay", "[unit][engine]") {
  auto engine = test::make_engine();
  const auto frame = udp_frame(1000);
  auto& gen = engine->add<Generator>("gen", frame, 1000);
  auto& sink = engine->add<Sink>("sink");
  LinkParams lp{.rate_bps = 100'000'000'000ull, .delay = us(2), .mtu = 9000, .tx_slack = {}};
  REQUIRE(engine->connect(gen, 0, sink, 0, lp).ok());
  engine->run_to_idle();
  CHECK(gen.sent() == 1000);
  CHECK(sink.packets() == 1000);
  // 1000 frames of (1000 + 24 overhead) bytes at 100 Gbit/s = 81.92 us, + 2 us.
  CHECK(sink.last_arrival() == ps(1000 * 1024 * 80) + us(2));
  const double gbps = double(sink.bytes() + 24 * 1000) * 8 / to_seconds(sink.last_arrival() - us(2)) / 1e9;
  CHECK(gbps == Approx(100.0).epsilon(1e-9));
}

TEST_CASE("Serialisation time is exact far beyond a frame", "[unit][engine]") {
  CHECK(serialization_time(1, 100'000'000'000ull) == ps(80));
  // 65535 PFC quanta of 512 bit times at 100G: 335.5392 us.
  CHECK(serialization_time(65535ull * 512 / 8, 100'000'000'000ull) == ps(335539200));
  CHECK(serialization_time(1ull << 40, 400'000'000'000ull) == Duration(int64_t(21990232555520)));
}

TEST_CASE("Link MTU, link down and Bernoulli loss are counted", "[unit][engine]") {
  auto engine = test::make_engine(7);
  auto& gen = engine->add<Generator>("gen", udp_frame(1500), 10000);
  auto& sink = engine->add<Sink>("sink");
  auto link = engine->connect(gen, 0, sink, 0, LinkParams{.mtu = 1400});
  REQUIRE(link.ok());
  engine->run_to_idle();
  CHECK(sink.packets() == 0);
  CHECK(gen.port(0)->counters()[PortCounters::tx_drop_oversize] == 10000);

  auto engine2 = test::make_engine(7);
  auto& gen2 = engine2->add<Generator>("gen", udp_frame(1000), 20000);
  auto& sink2 = engine2->add<Sink>("sink");
  auto link2 = engine2->connect(gen2, 0, sink2, 0, LinkParams{});
  REQUIRE(link2.ok());
  FaultConfig fc;
  fc.loss = 0.05;
  link2.value()->set_faults(0, fc);
  engine2->run_to_idle();
  const uint64_t lost = gen2.port(0)->counters()[PortCounters::tx_drop_fault];
  CHECK(lost + sink2.packets() == 20000);
  // 5 % of 20000 = 1000, sd ~31: a 5-sigma band.
  CHECK(lost > 845);
  CHECK(lost < 1155);
}

TEST_CASE("Fault config validation names the field", "[unit][engine]") {
  FaultConfig fc;
  fc.loss = 1.5;
  CHECK(fc.validate().message().find("loss") != std::string::npos);
  fc.loss = 0;
  fc.burst = GilbertElliott{.p_good_to_bad = -1};
  CHECK(fc.validate().message().find("burst.p_good_to_bad") != std::string::npos);
  fc.burst.reset();
  fc.drop.push_back(DropRule{.every_nth = 0});
  CHECK(fc.validate().message().find("every_nth") != std::string::npos);
}
