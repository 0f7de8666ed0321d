#include "sim/junit.h"

#include <cstdio>

namespace rocemu::sim {
namespace {

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

std::string testcase(const std::string& suite, const Check& c) {
  const std::string what =
      c.metric + " = " + (c.measured ? format_number(*c.measured) : "missing") + " (expected " + c.condition + ")";
  std::string out = "    <testcase classname=\"rocemu.sim." + xml_escape(suite) + "\" name=\"" + xml_escape(c.name) +
                    "\" time=\"0\">\n";
  if (c.pass) out += "      <system-out>" + xml_escape(what) + "</system-out>\n";
  else out += "      <failure type=\"expectation\" message=\"" + xml_escape(what) + "\"/>\n";
  return out + "    </testcase>\n";
}

}  // namespace

std::string junit_xml(const std::vector<JunitSuite>& suites, double wall_seconds) {
  size_t tests = 0, failures = 0;
  for (const JunitSuite& s : suites) {
    tests += s.verdict->checks.size();
    failures += s.verdict->failures();
  }
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"rocemu sim\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
         std::to_string(failures) + "\" time=\"" + seconds(wall_seconds) + "\">\n";
  for (const JunitSuite& s : suites) {
    out += "  <testsuite name=\"" + xml_escape(s.name) + "\" tests=\"" + std::to_string(s.verdict->checks.size()) +
           "\" failures=\"" + std::to_string(s.verdict->failures()) + "\" errors=\"0\" time=\"" +
           seconds(wall_seconds) + "\">\n";
    for (const Check& c : s.verdict->checks) out += testcase(s.name, c);
    out += "  </testsuite>\n";
  }
  return out + "</testsuites>\n";
}

}  // namespace rocemu::sim
