// The runtime directory, pid file and log cannot be redirected or opened
// up by another user: what is refused, with what message.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/private_files.h"

using namespace rocemu;

namespace {

struct PrivateDir {
  std::string path;
  PrivateDir() {
    char t[] = "/tmp/rocemu-private-XXXXXX";
    REQUIRE(mkdtemp(t) != nullptr);
    path = t;
  }
  ~PrivateDir() { REQUIRE(std::system(("rm -rf " + path).c_str()) == 0); }
};

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("The runtime directory is made private, and one not private is refused", "[unit]") {
  PrivateDir t;
  const std::string dir = t.path + "/run";
  SECTION("made new, mode 0700") {
    REQUIRE(ensure_private_dir(dir).ok());
    struct stat st{};
    REQUIRE(stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    CHECK(ensure_private_dir(dir).ok());  // and accepted again
  }
  SECTION("group or other access") {
    REQUIRE(mkdir(dir.c_str(), 0755) == 0);
    REQUIRE(chmod(dir.c_str(), 0755) == 0);
    const Status s = ensure_private_dir(dir);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains("0755") && Catch::Contains("chmod 700"));
  }
  SECTION("a symbolic link to a directory") {
    REQUIRE(mkdir((t.path + "/elsewhere").c_str(), 0700) == 0);
    REQUIRE(symlink((t.path + "/elsewhere").c_str(), dir.c_str()) == 0);
    const Status s = ensure_private_dir(dir);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains("symbolic link"));
  }
  SECTION("owned by another user") {
    if (geteuid() != 0) SUCCEED("needs root to make a directory of another user");
    else {
      REQUIRE(mkdir(dir.c_str(), 0700) == 0);
      REQUIRE(chown(dir.c_str(), 65534, 65534) == 0);
      const Status s = ensure_private_dir(dir);
      REQUIRE_FALSE(s.ok());
      CHECK_THAT(s.message(), Catch::Contains("owned by uid 65534"));
    }
  }
}

TEST_CASE("The pid file and log are never written through a symbolic link", "[unit]") {
  PrivateDir t;
  const std::string victim = t.path + "/victim", pid = t.path + "/rocemu.pid";
  { std::ofstream(victim) << "precious\n"; }
  REQUIRE(symlink(victim.c_str(), pid.c_str()) == 0);
  const Status s = write_private_file(pid, "1234\n");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("symbolic link"));
  CHECK(slurp(victim) == "precious\n");
  CHECK_FALSE(open_private_file(pid, true).ok());
  // A plain file is written, mode 0600.
  REQUIRE(unlink(pid.c_str()) == 0);
  REQUIRE(write_private_file(pid, "1234\n").ok());
  CHECK(slurp(pid) == "1234\n");
  struct stat st{};
  REQUIRE(stat(pid.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}
