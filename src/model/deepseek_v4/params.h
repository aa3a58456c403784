// The DeepSeek-V4 parameter layout, written once and used three ways.
//
// visit_*() walks a weights struct and names every tensor with its shape and storage, in
// the official checkpoint layout (no "model." prefix; linears as NAME.weight + NAME.scale).
// A visitor either declares the tensors (registry for the loader), binds loaded tensors to
// the struct, or generates random tensors (make-tiny). One walk, so the declaration, the
// binding and the tiny checkpoints cannot disagree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/loader.h"
#include "formats/param_registry.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace flint::dsv4 {

// How a linear layer is stored in the checkpoint.
enum class Storage {
  kF32,
  kBF16,
  kFp8,          // F8_E4M3 weight + F8_E8M0 scale per 128x128 block
  kFp8F32Scale,  // F8_E4M3 weight + F32 scale per 128x128 block (V4-Flash-Base experts)
  kFp4,          // I8 [rows, cols/2] packed E2M1 + F8_E8M0 scale per 32 columns
};

class ParamVisitor {
 public:
  virtual ~ParamVisitor() = default;
  // NAME.weight (+ NAME.scale unless kF32/kBF16), logical shape [rows, cols].
  virtual void linear(Linear& out, const std::string& name, int64_t rows, int64_t cols,
                      Storage storage, bool quantize_input) = 0;
  // A plain matrix stored under `name` (F32 or BF16), used in place.
  virtual void matrix(WeightMatrix& out, const std::string& name, int64_t rows, int64_t cols,
                      DType dtype) = 0;
  // A small F32/BF16 tensor of `shape`, copied to float32.
  virtual void vector(Vec& out, const std::string& name, const std::vector<int64_t>& shape,
                      DType dtype) = 0;
  // An I64 [rows, cols] table (tid2eid).
  virtual void index_table(const int64_t*& out, const std::string& name, int64_t rows,
                           int64_t cols) = 0;

  // While non-empty, visited tensors belong to this other component (shared, not owned).
  std::string shared_owner;
};

void visit_block(ParamVisitor& v, BlockWeights& w, const Config& c, const std::string& prefix,
                 int64_t layer_id);
void visit_target(ParamVisitor& v, TargetWeights& w, const Config& c);
// The target's embed and head, visited as shared (owned by the target) for the drafts.
void visit_shared_embed_head(ParamVisitor& v, WeightMatrix& embed, WeightMatrix& head,
                             const Config& c);
// MTP layer `index` without the shared embed/head.
void visit_mtp(ParamVisitor& v, MtpWeights& w, const Config& c, int64_t index);
void visit_dspark(ParamVisitor& v, DSparkWeights& w, const Config& c);

// The components a DeepSeek-V4 checkpoint holds.
enum class Component { kTarget, kMtp, kDSpark };
std::string component_name(Component component);

// Declares every tensor of `component` (the MTP component is the config's
// num_nextn_predict_layers MTP layers).
ParamRegistry declare(Component component, const Config& c);

// Fills weights from loaded parameters (which must come from declare() of the same
// component and config: anything missing here is a bug, checked).
void bind(const LoadedParams& params, const Config& c, TargetWeights* out);
void bind(const LoadedParams& params, const Config& c, std::vector<MtpWeights>* out);
void bind(const LoadedParams& params, const Config& c, DSparkWeights* out);

}  // namespace flint::dsv4
