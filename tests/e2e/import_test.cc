// One verbs context in two processes (ibv_import_device, ibv_import_pd,
// ibv_import_mr) and parent domains with their allocators, through the
// real libibverbs and the preloaded provider (rocemu-verify checks every
// byte and every errno; README "Sharing a context").
#include <cstdlib>
#include <string_view>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

TEST_CASE("A context, PD and MR imported by a child move the owner's bytes to a peer host; bad imports refused",
          "[e2e][verify][import]") {
  // On the fallback (the suite's fallback group) the owner's MRs are
  // refused once it has closed its device: the next case checks that.
  if (const char* dma = std::getenv("ROCEMU_DMA"); dma != nullptr && std::string_view(dma) == "process_vm") {
    WARN("ROCEMU_DMA=process_vm: the fallback case below checks the import");
    return;
  }
  Fabric f;
  const int port = pick_port();
  const std::vector<std::string> common = {"--port", std::to_string(port), "--size", "65536", "--iters", "3"};
  std::vector<std::string> srv = {bin("rocemu-verify"), "--server"}, cli = {bin("rocemu-verify"), "--import",
                                                                            "127.0.0.1"};
  srv.insert(srv.end(), common.begin(), common.end());
  cli.insert(cli.end(), common.begin(), common.end());
  const PairResult r = run_pair(f, "h2", "h1", srv, cli, port);
  INFO("owner and importer:\n" << r.client_out << "\npeer:\n" << r.server_out);
  CHECK(r.client == 0);
  CHECK(r.server == 0);
  CHECK_THAT(r.client_out, Catch::Contains("iteration 2 checked by the owner") &&
                               Catch::Contains("importer all good") && Catch::Contains("every byte checked"));
  // Both processes gone: nothing of the shared context stays in the engine.
  CHECK(wait_until([&] { return f.attached() == 0; }, std::chrono::seconds(10)));
}

TEST_CASE("On the fallback, the MR of an owner that closed its device is refused to the importer",
          "[e2e][verify][import]") {
  Fabric f;
  const int port = pick_port();
  const std::vector<std::string> common = {"--port", std::to_string(port), "--size", "65536", "--iters", "2"};
  std::vector<std::string> srv = {bin("rocemu-verify"), "--server"},
                           cli = {"env", "ROCEMU_DMA=process_vm", bin("rocemu-verify"), "--import", "127.0.0.1"};
  srv.insert(srv.end(), common.begin(), common.end());
  cli.insert(cli.end(), common.begin(), common.end());
  const PairResult r = run_pair(f, "h2", "h1", srv, cli, port);
  INFO("owner and importer:\n" << r.client_out << "\npeer:\n" << r.server_out);
  CHECK(r.client == 0);
  CHECK_THAT(r.client_out, Catch::Contains("iteration 0 checked by the owner") && Catch::Contains("importer all good"));
  CHECK(wait_until([&] { return f.attached() == 0; }, std::chrono::seconds(10)));
}

TEST_CASE("Parent domains: allocators place the QP and SRQ rings, EBUSY while in use, bad attributes refused",
          "[e2e][verify][import]") {
  Fabric f;
  Process p = f.exec("h1", {bin("rocemu-verify"), "--parent-domain", "--size", "65536", "--iters", "3"});
  const int st = finish(p, std::chrono::seconds(120));
  INFO(p.output);
  CHECK(st == 0);
  CHECK_THAT(p.output, Catch::Contains("every byte checked, all good"));
}
