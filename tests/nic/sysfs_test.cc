// The NIC's sysfs tree (nic/verbs/sysfs.h) and the FUSE protocol that
// serves it (nic/verbs/sysfs_fuse.h), request by request.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <linux/fuse.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>

#include "nic/verbs/sysfs.h"
#include "nic/verbs/sysfs_fuse.h"

using namespace rocemu::verbs;

namespace {

const SysfsFile* find(const std::vector<SysfsFile>& files, const std::string& path) {
  for (const auto& f : files)
    if (f.path == path) return &f;
  return nullptr;
}

std::vector<SysfsFile> sample_tree(uint64_t tx_packets, uint32_t state = IBV_PORT_ACTIVE) {
  DeviceInfo d{};
  d.node_guid = 0x020000fffe000101ull;
  d.num_gids = 2;
  d.gids[0].type = IBV_GID_TYPE_ROCE_V1;
  d.gids[0].raw[0] = 0xfe;
  d.gids[0].raw[1] = 0x80;
  d.gids[1].type = IBV_GID_TYPE_ROCE_V2;
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 1, 1};
  std::memcpy(d.gids[1].raw, v4, 16);
  PortInfo p{};
  p.state = state;
  p.rate_bps = 100'000'000'000ull;
  return sysfs_tree("h1", d, p, {{"tx_roce_packets", tx_packets}, {"tx_roce_bytes", 4000}, {"np_cnp_sent", 2}});
}

const std::string kDev = "/sys/class/infiniband/rocemu0";

}  // namespace

TEST_CASE("The sysfs tree says what the kernel would for a RoCE port", "[unit]") {
  const auto t = sample_tree(7);
  auto text = [&](const std::string& p) {
    const SysfsFile* f = find(t, p);
    return f != nullptr ? f->content : std::string("<missing " + p + ">");
  };
  CHECK(text(kDev + "/node_guid") == "0200:00ff:fe00:0101\n");
  CHECK(text(kDev + "/node_type") == "1: CA\n");
  CHECK(text(kDev + "/ports/1/state") == "4: ACTIVE\n");
  CHECK(text(kDev + "/ports/1/phys_state") == "5: LinkUp\n");
  CHECK(text(kDev + "/ports/1/rate") == "100 Gb/sec (4X EDR)\n");
  CHECK(text(kDev + "/ports/1/link_layer") == "Ethernet\n");
  CHECK(text(kDev + "/ports/1/gids/0") == "fe80:0000:0000:0000:0000:0000:0000:0000\n");
  CHECK(text(kDev + "/ports/1/gids/1") == "0000:0000:0000:0000:0000:ffff:0a00:0101\n");
  CHECK(text(kDev + "/ports/1/gid_attrs/types/0") == "IB/RoCE v1\n");
  CHECK(text(kDev + "/ports/1/gid_attrs/types/1") == "RoCE v2\n");
  CHECK(text(kDev + "/ports/1/gid_attrs/ndevs/1") == "rocemu-h1\n");
  CHECK(text(kDev + "/ports/1/hw_counters/tx_roce_packets") == "7\n");
  CHECK(text(kDev + "/ports/1/counters/port_xmit_data") == "1000\n");  // 4-byte words
  CHECK(text(kDev + "/ports/1/counters/port_xmit_packets") == "7\n");
  CHECK(text("/sys/class/infiniband_verbs/uverbs0/ibdev") == "rocemu0\n");
  CHECK(text("/sys/class/infiniband_verbs/abi_version") == "6\n");
  const SysfsFile* dev = find(t, "/dev/infiniband/uverbs0");
  REQUIRE(dev != nullptr);
  CHECK(dev->kind == SysfsFile::Kind::kCharDevice);
  CHECK(dev->content == "231:192");
  CHECK(find(t, kDev + "/ports/1/gids/2") == nullptr);  // as many as the table has
  const auto down = sample_tree(7, IBV_PORT_DOWN);
  CHECK(find(down, kDev + "/ports/1/state")->content == "1: DOWN\n");
  CHECK(find(down, kDev + "/ports/1/phys_state")->content == "3: Disabled\n");
}

TEST_CASE("The sysfs tree's wire form round-trips and refuses what is not one", "[unit]") {
  const auto t = sample_tree(123);
  const auto back = parse_sysfs(serialize(t));
  REQUIRE(back.has_value());
  REQUIRE(back->size() == t.size());
  for (size_t i = 0; i < t.size(); i++) {
    CHECK((*back)[i].path == t[i].path);
    CHECK((*back)[i].content == t[i].content);
    CHECK((*back)[i].kind == t[i].kind);
  }
  CHECK(!parse_sysfs("F /a 5\nab"));              // shorter than it says
  CHECK(!parse_sysfs("X /a 1\na"));               // unknown kind
  CHECK(!parse_sysfs("F relative 1\na"));         // not absolute
  CHECK(!parse_sysfs("F /sys/../etc/passwd 1\na"));  // no climbing
  CHECK(!parse_sysfs("F /a 1x\na"));
  CHECK(parse_sysfs("")->empty());
}

namespace {

// A FUSE client in a test: requests built as the kernel builds them.
struct FuseClient {
  SysfsFuse& fs;
  uint64_t unique = 1;

  std::vector<uint8_t> call(uint32_t opcode, uint64_t nodeid, const void* arg, size_t len) {
    std::vector<uint8_t> req(sizeof(fuse_in_header) + len);
    fuse_in_header h{};
    h.len = uint32_t(req.size());
    h.opcode = opcode;
    h.unique = unique++;
    h.nodeid = nodeid;
    std::memcpy(req.data(), &h, sizeof h);
    if (len > 0) std::memcpy(req.data() + sizeof h, arg, len);
    return fs.handle(req);
  }
  static int error(const std::vector<uint8_t>& reply) {
    fuse_out_header h{};
    std::memcpy(&h, reply.data(), sizeof h);
    REQUIRE(h.len == reply.size());
    return -h.error;
  }
  template <typename T>
  static T body(const std::vector<uint8_t>& reply) {
    REQUIRE(reply.size() >= sizeof(fuse_out_header) + sizeof(T));
    T t;
    std::memcpy(&t, reply.data() + sizeof(fuse_out_header), sizeof t);
    return t;
  }
  uint64_t lookup(uint64_t parent, const std::string& name) {
    const auto r = call(FUSE_LOOKUP, parent, name.c_str(), name.size() + 1);
    if (error(r) != 0) return 0;
    return body<fuse_entry_out>(r).nodeid;
  }
  uint64_t walk(const std::string& rel) {
    uint64_t id = FUSE_ROOT_ID;
    size_t from = 0;
    while (id != 0 && from < rel.size()) {
      const size_t slash = rel.find('/', from);
      id = lookup(id, rel.substr(from, slash - from));
      from = slash == std::string::npos ? rel.size() : slash + 1;
    }
    return id;
  }
  std::string read(uint64_t id, uint64_t offset = 0, uint32_t size = 4096) {
    fuse_read_in in{};
    in.offset = offset;
    in.size = size;
    const auto r = call(FUSE_READ, id, &in, sizeof in);
    REQUIRE(error(r) == 0);
    return std::string(r.begin() + sizeof(fuse_out_header), r.end());
  }
};

}  // namespace

TEST_CASE("The FUSE sysfs answers each read with the tree of that moment", "[unit]") {
  uint64_t packets = 5;
  SysfsFuse fs("/sys/class/infiniband", sample_tree(packets), [&] { return sample_tree(packets); });
  FuseClient c{fs};
  fuse_init_in init{};
  init.major = FUSE_KERNEL_VERSION;
  init.minor = FUSE_KERNEL_MINOR_VERSION;
  const auto ir = c.call(FUSE_INIT, 0, &init, sizeof init);
  REQUIRE(FuseClient::error(ir) == 0);
  CHECK(FuseClient::body<fuse_init_out>(ir).major == FUSE_KERNEL_VERSION);

  const uint64_t counter = c.walk("rocemu0/ports/1/hw_counters/tx_roce_packets");
  REQUIRE(counter != 0);
  CHECK(c.walk("rocemu0/ports/1/hw_counters/nope") == 0);
  CHECK(c.walk("rocemu1") == 0);
  const auto attr = FuseClient::body<fuse_attr_out>(c.call(FUSE_GETATTR, counter, nullptr, 0));
  CHECK(attr.attr.mode == (S_IFREG | 0444));
  CHECK(attr.attr.size == 4096);  // as sysfs says
  const auto dattr = FuseClient::body<fuse_attr_out>(c.call(FUSE_GETATTR, c.walk("rocemu0/ports"), nullptr, 0));
  CHECK(dattr.attr.mode == (S_IFDIR | 0755));

  fuse_open_in ro{};
  ro.flags = O_RDONLY;
  const auto opened = c.call(FUSE_OPEN, counter, &ro, sizeof ro);
  REQUIRE(FuseClient::error(opened) == 0);
  CHECK((FuseClient::body<fuse_open_out>(opened).open_flags & FOPEN_DIRECT_IO) != 0);  // no page cache
  fuse_open_in rw{};
  rw.flags = O_RDWR;
  CHECK(FuseClient::error(c.call(FUSE_OPEN, counter, &rw, sizeof rw)) == EACCES);

  CHECK(c.read(counter) == "5\n");
  packets = 123456;
  CHECK(c.read(counter) == "123456\n");  // the same open file, read again: the new value
  CHECK(c.read(counter, 4) == "56\n");
  CHECK(c.read(counter, 2, 2) == "34");
  CHECK(c.read(counter, 100).empty());
  CHECK(c.read(c.walk("rocemu0/ports/1/state")) == "4: ACTIVE\n");

  // A directory lists ".", ".." and its entries.
  fuse_read_in rd{};
  rd.size = 4096;
  const auto dir = c.call(FUSE_READDIR, c.walk("rocemu0/ports/1"), &rd, sizeof rd);
  REQUIRE(FuseClient::error(dir) == 0);
  std::vector<std::string> names;
  for (size_t at = sizeof(fuse_out_header); at < dir.size();) {
    fuse_dirent d;
    std::memcpy(&d, dir.data() + at, sizeof d);
    names.emplace_back(reinterpret_cast<const char*>(dir.data() + at + FUSE_NAME_OFFSET), d.namelen);
    at += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + d.namelen);
  }
  for (const char* want : {".", "..", "state", "phys_state", "rate", "hw_counters", "counters", "gids", "gid_attrs"})
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  // A small buffer gets what fits, and the next offset resumes.
  rd.size = 64;
  const auto part = c.call(FUSE_READDIR, c.walk("rocemu0/ports/1"), &rd, sizeof rd);
  CHECK(part.size() <= sizeof(fuse_out_header) + 64);
  CHECK(part.size() > sizeof(fuse_out_header));

  CHECK(FuseClient::error(c.call(FUSE_WRITE, counter, nullptr, 0)) == ENOSYS);
  CHECK(FuseClient::error(c.call(FUSE_MKDIR, FUSE_ROOT_ID, nullptr, 0)) == ENOSYS);
  fuse_forget_in fg{1};
  CHECK(c.call(FUSE_FORGET, counter, &fg, sizeof fg).empty());  // no reply
  CHECK(!fs.destroyed());
  CHECK(FuseClient::error(c.call(FUSE_DESTROY, 0, nullptr, 0)) == 0);
  CHECK(fs.destroyed());
}

TEST_CASE("The FUSE sysfs of a NIC that is gone fails its reads with ENODEV", "[unit]") {
  bool gone = false;
  SysfsFuse fs("/sys/class/infiniband", sample_tree(1), [&] {
    return gone ? std::vector<SysfsFile>{} : sample_tree(1);
  });
  FuseClient c{fs};
  const uint64_t id = c.walk("rocemu0/node_guid");
  REQUIRE(id != 0);
  CHECK(c.read(id) == "0200:00ff:fe00:0101\n");
  gone = true;
  fuse_read_in in{};
  in.size = 4096;
  CHECK(FuseClient::error(c.call(FUSE_READ, id, &in, sizeof in)) == ENODEV);
}
