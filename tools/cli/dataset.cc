// IDX reading with zlib (gzread also reads uncompressed files).
#include "tools/cli/dataset.h"

#include <zlib.h>

#include <fstream>

namespace ontrain {
namespace cli {

namespace {

StatusOr<std::string> ReadGz(const std::string& path) {
  if (std::ifstream(path).fail()) return NotFound("\"", path, "\" does not exist");
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return IoError("cannot open \"", path, "\"");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  int err = 0;
  const std::string msg = gzerror(f, &err);  // copied: the message belongs to `f`, which gzclose frees
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) return DataLoss("\"", path, "\" is corrupt: ", msg);
  return out;
}

uint32_t BigEndian(const std::string& s, size_t off) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[off])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[off + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[off + 2])) << 8) | static_cast<uint8_t>(s[off + 3]);
}

}  // namespace

StatusOr<ImageDataset> LoadIdxPair(const std::string& images_path, const std::string& labels_path) {
  ONT_ASSIGN_OR_RETURN(std::string img, ReadGz(images_path));
  ONT_ASSIGN_OR_RETURN(std::string lab, ReadGz(labels_path));
  if (img.size() < 16 || BigEndian(img, 0) != 0x803) return DataLoss("\"", images_path, "\" is not an IDX image file");
  if (lab.size() < 8 || BigEndian(lab, 0) != 0x801) return DataLoss("\"", labels_path, "\" is not an IDX label file");
  ImageDataset d;
  d.count = BigEndian(img, 4);
  d.rows = BigEndian(img, 8);
  d.cols = BigEndian(img, 12);
  // Sizes are checked against the file before any product that could overflow (each field is 32-bit).
  const int64_t data_bytes = static_cast<int64_t>(img.size()) - 16;
  if (d.rows > 0 && d.cols > data_bytes / d.rows) {
    return DataLoss("\"", images_path, "\" declares ", d.rows, "x", d.cols, " images but holds ", data_bytes,
                    " bytes of pixels");
  }
  int64_t pixels = d.rows * d.cols;
  if ((pixels == 0 && data_bytes != 0) || (pixels > 0 && (data_bytes % pixels != 0 || data_bytes / pixels != d.count))) {
    return DataLoss("\"", images_path, "\" is truncated: ", img.size(), " bytes for ", d.count, " images of ", d.rows,
                    "x", d.cols);
  }
  if (BigEndian(lab, 4) != d.count || static_cast<int64_t>(lab.size()) != 8 + d.count) {
    return DataLoss("\"", labels_path, "\" does not hold ", d.count, " labels");
  }
  d.images.resize(static_cast<size_t>(d.count * pixels));
  for (size_t i = 0; i < d.images.size(); ++i) d.images[i] = static_cast<uint8_t>(img[16 + i]) / 255.0f;
  d.labels.resize(static_cast<size_t>(d.count));
  for (int64_t i = 0; i < d.count; ++i) d.labels[i] = static_cast<uint8_t>(lab[8 + i]);
  return d;
}

StatusOr<ImageDataset> LoadDataset(const std::string& spec, const std::string& root) {
  std::string split;
  if (spec == "fashion-mnist") split = "train";
  else if (spec == "fashion-mnist:test") split = "t10k";
  else return InvalidArgument("unknown data spec \"", spec, "\"; expected fashion-mnist or fashion-mnist:test");
  std::string images = root + "/" + split + "-images-idx3-ubyte.gz";
  std::string labels = root + "/" + split + "-labels-idx1-ubyte.gz";
  if (std::ifstream(images).fail() || std::ifstream(labels).fail()) {
    return NotFound("Fashion-MNIST is not installed: ", images,
                    " is missing (it comes with the Debian package dataset-fashion-mnist; tools/setup.sh installs it)");
  }
  return LoadIdxPair(images, labels);
}

}  // namespace cli
}  // namespace ontrain
