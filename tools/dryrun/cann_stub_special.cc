// Hand-written stand-ins for the few CANN symbols whose callers inline code that touches the returned
// object (so "return 0" is not enough). Layouts follow the public GE headers; GE is built with the old
// (pre-C++11) std::string ABI, so this file is compiled with -D_GLIBCXX_USE_CXX11_ABI=0. Stand-ins only
// (built by tools/dryrun/make_cann_stubs.sh, `make dryrun`).
#include <cstdint>
#include <map>
#include <string>
#include <functional>
#include <memory>

namespace ge {
class StatusFactory {
 public:
  static StatusFactory *Instance();
  std::map<uint32_t, std::string> err_desc_;
};
StatusFactory *StatusFactory::Instance() {
  static StatusFactory instance;
  return &instance;
}

// Pimpl value types: a null shared_ptr is a valid "empty" object.
class AscendString {
 public:
  AscendString() = default;
  AscendString(const char *name);  // NOLINT
  const char *GetString() const;
  size_t Hash() const;
  bool operator==(const AscendString &d) const;
  bool operator<(const AscendString &d) const;
  std::shared_ptr<std::string> name_;
};
AscendString::AscendString(const char *name) {
  if (name != nullptr) name_ = std::make_shared<std::string>(name);
}
const char *AscendString::GetString() const { return name_ ? name_->c_str() : ""; }
size_t AscendString::Hash() const { return std::hash<std::string>()(name_ ? *name_ : std::string()); }
bool AscendString::operator==(const AscendString &d) const {
  return std::string(GetString()) == std::string(d.GetString());
}
bool AscendString::operator<(const AscendString &d) const {
  return std::string(GetString()) < std::string(d.GetString());
}

class TensorDescImpl;
class TensorDesc {
 public:
  TensorDesc();
  TensorDesc(const TensorDesc &desc);
  TensorDesc(TensorDesc &&desc);
  std::shared_ptr<TensorDescImpl> impl;
};
TensorDesc::TensorDesc() {}
TensorDesc::TensorDesc(const TensorDesc &desc) : impl(desc.impl) {}
TensorDesc::TensorDesc(TensorDesc &&desc) : impl(std::move(desc.impl)) {}

// ge::Operator: a vtable (inline virtual destructor) and a shared_ptr to its implementation.
class OperatorImpl;
class Operator {
 public:
  Operator() {}
  explicit Operator(const char *type);
  Operator(const char *name, const char *type);
  Operator(const std::string &name, const std::string &type);
  explicit Operator(const std::string &type);
  virtual ~Operator() = default;
  bool IsEmpty() const;
  std::string GetName() const;
  std::string GetOpType() const;
  TensorDesc GetInputDesc(const std::string &name) const;
  TensorDesc GetInputDesc(uint32_t index) const;
  TensorDesc GetOutputDesc(const std::string &name) const;
  TensorDesc GetOutputDesc(uint32_t index) const;
  TensorDesc GetInputDescByName(const char *name) const;
  TensorDesc GetOutputDescByName(const char *name) const;
  TensorDesc GetDynamicInputDesc(const char *name, uint32_t index) const;
  const std::map<std::string, std::string> GetAllAttrNamesAndTypes() const;
  std::shared_ptr<OperatorImpl> operator_impl_{nullptr};
};
Operator::Operator(const char *) {}
Operator::Operator(const char *, const char *) {}
Operator::Operator(const std::string &, const std::string &) {}
Operator::Operator(const std::string &) {}
bool Operator::IsEmpty() const { return true; }
std::string Operator::GetName() const { return std::string(); }
std::string Operator::GetOpType() const { return std::string(); }
TensorDesc Operator::GetInputDesc(const std::string &) const { return TensorDesc(); }
TensorDesc Operator::GetInputDesc(uint32_t) const { return TensorDesc(); }
TensorDesc Operator::GetOutputDesc(const std::string &) const { return TensorDesc(); }
TensorDesc Operator::GetOutputDesc(uint32_t) const { return TensorDesc(); }
TensorDesc Operator::GetInputDescByName(const char *) const { return TensorDesc(); }
TensorDesc Operator::GetOutputDescByName(const char *) const { return TensorDesc(); }
TensorDesc Operator::GetDynamicInputDesc(const char *, uint32_t) const { return TensorDesc(); }
const std::map<std::string, std::string> Operator::GetAllAttrNamesAndTypes() const {
  return std::map<std::string, std::string>();
}

class OperatorFactory {
 public:
  static Operator CreateOperator(const char *operator_name, const char *operator_type);
  static Operator CreateOperator(const std::string &operator_name, const std::string &operator_type);
};
Operator OperatorFactory::CreateOperator(const char *, const char *) { return Operator(); }
Operator OperatorFactory::CreateOperator(const std::string &, const std::string &) { return Operator(); }
}  // namespace ge

// The generic stubs of stub.S jump here with their own name in the first argument register.
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
static bool Trace() {
  static const bool on = std::getenv("CANN_STUB_TRACE") != nullptr;
  return on;
}
static void Say(const char *what, const char *name) {
  if (Trace()) std::fprintf(stderr, "[cann-stub] %s %s\n", what, name);
}
extern "C" long cann_stub_zero(const char *name) { Say("ret0", name); return 0; }
extern "C" void *cann_stub_ptr(const char *name, void *obj) { Say("retobj", name); return obj; }
extern "C" void *cann_stub_calloc(const char *name) { Say("calloc", name); return std::calloc(1, 4096); }

// Two stand-ins that return data, needed by the legacy (use_legacy: True) Llama graph. Its ACL-op kernels ask for
// the SoC name and then the CANN version; the mcore graphs never call either (checked with CANN_STUB_TRACE=1: the
// Qwen3-32B 8-layer stage-0 DryRun gives the identical 8757M/9738M with and without them).
// aclrtGetSocName: callers build a std::string from it, a null pointer throws "basic_string::_M_construct null
// not valid". Ascend910B1 is the 64 GB Atlas 800T A2 part (the simulated device has 64 GB).
extern "C" const char *aclrtGetSocName() { Say("soc", "aclrtGetSocName"); return "Ascend910B1"; }

// aclsysGetCANNVersion(aclCANNPackageName, aclCANNPackageVersion *): CANN's struct (acl_base.h) is char
// version[128], then char[64] majorVersion, minorVersion, releaseVersion, patchVersion, then char reserved[128];
// callers stoi() the parts ("stoi" error with the all-zero struct of the generic stand-in).
#include <cstring>
extern "C" int aclsysGetCANNVersion(int, char *v) {
  Say("version", "aclsysGetCANNVersion");
  std::memset(v, 0, 128 + 4 * 64 + 128);
  std::strcpy(v, "8.5.0");
  std::strcpy(v + 128, "8");
  std::strcpy(v + 128 + 64, "5");
  std::strcpy(v + 128 + 128, "0");
  std::strcpy(v + 128 + 192, "0");
  return 0;
}
