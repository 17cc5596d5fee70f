// Flag parsing.
#include "tools/cli/flags.h"

#include <cstdlib>

namespace ontrain {
namespace cli {

StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args, const std::set<std::string>& with_value,
                             const std::set<std::string>& switches) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) return InvalidArgument("unexpected argument \"", a, "\"");
    std::string name = a.substr(2), value;
    size_t eq = name.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (switches.count(name)) {
      f.values_[name] = "1";
    } else if (with_value.count(name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) return InvalidArgument("flag --", name, " needs a value");
        value = args[++i];
      }
      f.values_[name] = value;
    } else {
      return InvalidArgument("unknown flag --", name);
    }
  }
  return f;
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

StatusOr<int64_t> Flags::GetInt(const std::string& name, int64_t fallback) const {
  if (!Has(name)) return fallback;
  const std::string& v = values_.at(name);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') return InvalidArgument("--", name, " expects an integer, got \"", v, "\"");
  return static_cast<int64_t>(x);
}

StatusOr<double> Flags::GetDouble(const std::string& name, double fallback) const {
  if (!Has(name)) return fallback;
  const std::string& v = values_.at(name);
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') return InvalidArgument("--", name, " expects a number, got \"", v, "\"");
  return x;
}

std::vector<std::string> Flags::GetList(const std::string& name) const {
  std::vector<std::string> out;
  std::string v = Get(name);
  size_t start = 0;
  while (start <= v.size() && !v.empty()) {
    size_t comma = v.find(',', start);
    std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace cli
}  // namespace ontrain
