// Status and StatusOr: how every fallible call in ontrain reports what went wrong.
//
// Errors a caller can act on (bad model, unsupported op, shape mismatch, I/O) are returned, never thrown or
// aborted on. Messages carry context, outermost first: `node "fc1" (MatMul): inner dimensions differ: ...`.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace ontrain {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller passed something malformed (model, feed, shape, dtype)
  kNotFound,          // a named thing (file, input, op kernel) does not exist
  kUnimplemented,     // valid input that ontrain does not support (yet)
  kFailedPrecondition,
  kOutOfRange,
  kDataLoss,          // truncated or corrupt bytes
  kInternal,
  kIoError,
  kResourceExhausted,  // over a limit the caller set (memory), or more than a file can back
};

const char* StatusCodeName(StatusCode code);

// Concatenates any streamable values into one string.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Returns this error with `context` prepended ("context: message"); OK stays OK.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status InvalidArgument(const Args&... args) { return Status(StatusCode::kInvalidArgument, StrCat(args...)); }
template <typename... Args>
Status NotFound(const Args&... args) { return Status(StatusCode::kNotFound, StrCat(args...)); }
template <typename... Args>
Status Unimplemented(const Args&... args) { return Status(StatusCode::kUnimplemented, StrCat(args...)); }
template <typename... Args>
Status FailedPrecondition(const Args&... args) {
  return Status(StatusCode::kFailedPrecondition, StrCat(args...));
}
template <typename... Args>
Status DataLoss(const Args&... args) { return Status(StatusCode::kDataLoss, StrCat(args...)); }
template <typename... Args>
Status Internal(const Args&... args) { return Status(StatusCode::kInternal, StrCat(args...)); }
template <typename... Args>
Status IoError(const Args&... args) { return Status(StatusCode::kIoError, StrCat(args...)); }
template <typename... Args>
Status ResourceExhausted(const Args&... args) { return Status(StatusCode::kResourceExhausted, StrCat(args...)); }

// Either a value or the error explaining why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  // The same error with `context` in front of its message; a value passes through.
  StatusOr<T> WithContext(const std::string& context) && {
    if (!ok()) return status_.WithContext(context);
    return std::move(*this);
  }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace ontrain

#define ONT_CONCAT_INNER_(a, b) a##b
#define ONT_CONCAT_(a, b) ONT_CONCAT_INNER_(a, b)

#define ONT_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::ontrain::Status ont_status_ = (expr);    \
    if (!ont_status_.ok()) return ont_status_; \
  } while (0)

#define ONT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#define ONT_ASSIGN_OR_RETURN(lhs, expr) ONT_ASSIGN_OR_RETURN_IMPL_(ONT_CONCAT_(ont_sor_, __LINE__), lhs, expr)

// Returns an InvalidArgument error built from the remaining arguments when `cond` is false.
#define ONT_CHECK_ARG(cond, ...) \
  do {                           \
    if (!(cond)) return ::ontrain::InvalidArgument(__VA_ARGS__); \
  } while (0)
