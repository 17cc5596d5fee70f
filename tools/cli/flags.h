// A small command-line flag parser: "--name value" and boolean "--name"; unknown flags are errors.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace ontrain {
namespace cli {

class Flags {
 public:
  // `with_value` and `switches` list the accepted flag names (without "--").
  static StatusOr<Flags> Parse(const std::vector<std::string>& args, const std::set<std::string>& with_value,
                               const std::set<std::string>& switches);
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  std::vector<std::string> GetList(const std::string& name) const;  // comma-separated

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace cli
}  // namespace ontrain
