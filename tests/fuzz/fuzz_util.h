// Helpers shared by the fuzz targets of tests/fuzz: splitting one fuzzed input into the several files a
// loader reads, and a private scratch folder for loaders that only read paths.
//
// A multi-file input is its sections joined by kSectionMark (tools/make_fuzz_corpus.py writes the seeds
// that way): a marker the mutator can move, drop or duplicate keeps the rest of each section intact, which
// a length prefix would not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ontrain {
namespace fuzz {

constexpr char kSectionMark[] = "\n=ONTRAIN-FUZZ-SECTION=\n";

// Always `count` sections; missing ones are empty, extra text stays in the last.
std::vector<std::string> SplitSections(const uint8_t* data, size_t size, size_t count);

// A folder of this process's own under $TMPDIR, made on first use and reused (fuzzing runs millions of
// inputs; creating a folder per input would dominate).
const std::string& ScratchDir();

// Writes `bytes` to ScratchDir()/name and returns the path (aborts when the write fails: that is the
// harness failing, not the code under test).
std::string WriteScratchFile(const std::string& name, const std::string& bytes);

// Removes what WriteScratchFile wrote under `name` (missing files are fine).
void RemoveScratchFile(const std::string& name);

}  // namespace fuzz
}  // namespace ontrain
