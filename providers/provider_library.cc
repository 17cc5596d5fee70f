// Loading and checking a provider shared library (core/plugin_library.h finds and opens it).
#include "providers/provider_library.h"

#include "core/plugin_library.h"

namespace ontrain {

StatusOr<const ProviderLibraryApi*> LoadProviderLibrary(const std::string& file, const std::string& runfiles_path,
                                                        const std::string& path_env) {
  ONT_ASSIGN_OR_RETURN(void* sym, LoadPluginSymbol(file, runfiles_path, path_env, "OntrainProviderLibrary"));
  using Entry = const ProviderLibraryApi* (*)();
  const ProviderLibraryApi* api = reinterpret_cast<Entry>(sym)();
  if (api == nullptr || api->abi_version != kProviderAbiVersion || api->abi_sizes != ProviderAbiSizes()) {
    return FailedPrecondition(file, " was built by another version of ontrain (provider ABI ",
                              api ? api->abi_version : 0, ", this build expects ", kProviderAbiVersion,
                              "); rebuild it together with this binary");
  }
  return api;
}

}  // namespace ontrain
