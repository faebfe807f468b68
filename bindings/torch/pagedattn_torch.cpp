// The PyTorch extension `pagedattn`: the entry point (api/decode.h) for torch tensors, in the
// layout vLLM's FlashAttention backend keeps its paged cache in. Plan once for a batch's shape
// (pagedattn.DecodePlan), then decode with the plan at every step (DecodePlan.decode), on torch's
// current CUDA stream. Nothing here computes attention: it checks each tensor against the plan,
// naming the argument as every error of the project does, points a pa::DecodeView at the
// tensors, and calls pa::decode. The constructor takes what pa::plan_decode does: the shapes, the
// K/V storage (fp8 e4m3 with a scale for each cache: step 12) and, optionally, the host copy of
// the batch's lengths (a ragged batch then gets step 11). Its page is docs/pages/pytorch.md;
// build.py builds it and test_decode.py holds it to torch's scaled_dot_product_attention.

#include <torch/extension.h>

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "api/decode.h"
#include "common/cuda/runtime.h"
#include "common/error.h"

namespace py = pybind11;

namespace {

constexpr const char* kPlan = "pagedattn.DecodePlan";
constexpr const char* kDecode = "pagedattn.DecodePlan.decode";

/// "torch.bfloat16": a dtype as Python prints it.
std::string dtype_name(at::ScalarType type) { return py::str(py::cast(type)); }

/// The storage type of a torch dtype: the three the rungs store.
pa::DType storage_of(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16: return pa::DType::bf16;
    case at::kHalf: return pa::DType::f16;
    case at::kFloat: return pa::DType::f32;
    default:
      pa::throw_argument(kPlan, "dtype", "torch.bfloat16, torch.float16 or torch.float32", dtype_name(type));
  }
}

at::ScalarType torch_type(pa::DType dtype) {
  switch (dtype) {
    case pa::DType::bf16: return at::kBFloat16;
    case pa::DType::f16: return at::kHalf;
    case pa::DType::f32: break;
    case pa::DType::e4m3: return at::kFloat8_e4m3fn;  // a K/V type only (pa::DecodeProblem::cache_dtype)
  }
  return at::kFloat;
}

/// The strides of a contiguous tensor of \p shape, in elements.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// What one tensor argument of decode must be, checked in this order by require(), each failure
/// naming the argument: on `device`, of `type`, of `shape`, and with `strides` along every
/// dimension longer than 1 (a dimension of one element is never stepped along, and torch gives it
/// any stride).
struct Expected {
  const char* argument;
  at::Device device;
  at::ScalarType type;
  std::vector<std::int64_t> shape;
  const char* shape_names;  // "[num_seqs, num_q_heads, head_dim]"
  std::vector<std::int64_t> strides;
  const char* strides_why;  // "contiguous"
};

void require(const at::Tensor& tensor, const Expected& e) {
  const std::string name = e.argument;
  PA_REQUIRE(tensor.device() == e.device, kDecode, name + ".device", pa::cat(e.device.str(), " (the plan's device)"),
             tensor.device().str());
  PA_REQUIRE(tensor.scalar_type() == e.type, kDecode, name + ".dtype", dtype_name(e.type),
             dtype_name(tensor.scalar_type()));
  PA_REQUIRE(tensor.sizes() == c10::IntArrayRef(e.shape), kDecode, name + ".shape",
             pa::cat(e.shape_names, " = ", c10::IntArrayRef(e.shape)), tensor.sizes());
  for (std::size_t d = 0; d < e.shape.size(); ++d)
    PA_REQUIRE(e.shape[d] <= 1 || tensor.stride(static_cast<std::int64_t>(d)) == e.strides[d], kDecode,
               name + ".stride()", pa::cat(c10::IntArrayRef(e.strides), " (", e.strides_why, ")"), tensor.strides());
}

/// The device a plan runs on, from what torch.device() takes (None: "cuda"): a CUDA device (the
/// current one when no index is given), or the CPU, where the emulator runs (slowly: it checks
/// every access; for debugging).
at::Device plan_device(const py::object& asked) {
  at::Device device = asked.is_none() ? at::Device(at::kCUDA)
                                      : py::module_::import("torch").attr("device")(asked).cast<at::Device>();
  if (device.is_cpu()) return device;
  PA_REQUIRE(device.is_cuda(), kPlan, "device", "a CUDA device, or cpu (the emulator)", device.str());
  const int count = c10::cuda::device_count();
  // With no device at all, plan_decode raises the reason (CudaError "no CUDA device: ...").
  if (count == 0) return at::Device(at::kCUDA, 0);
  if (!device.has_index()) return at::Device(at::kCUDA, c10::cuda::current_device());
  PA_REQUIRE(device.index() < count, kPlan, "device", pa::cat("one of the ", count, " CUDA devices here"), device.str());
  return device;
}

/// Whether the caches of \p kv_dtype are fp8 e4m3 (pa::DecodeProblem::fp8_kv): None and the plan's
/// \p dtype say no, torch.float8_e4m3fn (OCP's E4M3FN, the e4m3 of CUDA and of step 12) yes.
bool fp8_of(std::optional<at::ScalarType> kv_dtype, at::ScalarType dtype) {
  if (!kv_dtype || *kv_dtype == dtype) return false;
  PA_REQUIRE(*kv_dtype == at::kFloat8_e4m3fn, kPlan, "kv_dtype",
             pa::cat("None, ", dtype_name(dtype), " (the plan's dtype) or torch.float8_e4m3fn"),
             dtype_name(*kv_dtype));
  return true;
}

/// The DecodeProblem of the constructor's arguments: the cache's strides are \p cache_strides,
/// those of key_cache and value_cache's [num_blocks, block_size, num_kv_heads, head_dim]; K/V
/// are fp8 e4m3 when \p kv_dtype says so, with \p k_scale and \p v_scale (pa::validate checks
/// the scales: positive with fp8, 1 without).
pa::DecodeProblem problem_of(int num_seqs, int num_q_heads, int num_kv_heads, int head_dim, int block_size,
                               int max_blocks_per_seq, std::int64_t num_blocks, at::ScalarType dtype,
                               std::optional<int> max_context_len, std::optional<double> scale,
                               const std::vector<std::int64_t>& cache_strides, std::optional<at::ScalarType> kv_dtype,
                               double k_scale, double v_scale) {
  // A row of the block table holds max_blocks_per_seq pages: by default the plan serves every
  // length it can hold, so one plan serves the batch while its sequences grow.
  pa::DecodeProblem problem =
      pa::make_problem(num_seqs, num_q_heads, num_kv_heads, head_dim, block_size, max_blocks_per_seq,
                       max_context_len.value_or(max_blocks_per_seq * block_size), num_blocks, storage_of(dtype));
  if (scale) problem.scale = static_cast<float>(*scale);
  problem.layout.block_stride = cache_strides[0];
  problem.layout.token_stride = cache_strides[1];
  problem.layout.head_stride = cache_strides[2];
  problem.layout.dim_stride = cache_strides[3];
  problem.fp8_kv = fp8_of(kv_dtype, dtype);
  problem.k_scale = static_cast<float>(k_scale);
  problem.v_scale = static_cast<float>(v_scale);
  return problem;
}

/// The host copy of the batch's lengths that the constructor's context_lens gives: none for None;
/// else the values of a CPU torch.int32 tensor of one dimension, or of a sequence of ints (numpy's
/// too), each an int32. Their count and range are pa::plan_decode's to check (pa::validate_lengths),
/// in its words.
std::optional<std::vector<std::int32_t>> host_lengths(const py::object& given) {
  if (given.is_none()) return std::nullopt;
  if (THPVariable_Check(given.ptr())) {
    const at::Tensor tensor = given.cast<at::Tensor>();
    PA_REQUIRE(tensor.device().is_cpu(), kPlan, "context_lens.device",
               "cpu (the host copy of the lengths: a plan is host work)", tensor.device().str());
    PA_REQUIRE(tensor.scalar_type() == at::kInt, kPlan, "context_lens.dtype", "torch.int32",
               dtype_name(tensor.scalar_type()));
    PA_REQUIRE(tensor.dim() == 1, kPlan, "context_lens.dim()", "1 ([num_seqs])", tensor.dim());
    const at::Tensor dense = tensor.contiguous();
    const std::int32_t* first = dense.data_ptr<std::int32_t>();
    return std::vector<std::int32_t>(first, first + dense.numel());
  }
  PA_REQUIRE(py::isinstance<py::sequence>(given) && !py::isinstance<py::str>(given), kPlan, "context_lens",
             "None, a sequence of ints or a CPU torch.int32 tensor [num_seqs]",
             std::string(py::str(py::type::of(given).attr("__name__"))));
  std::vector<std::int32_t> lengths;
  std::size_t seq = 0;
  for (const py::handle item : given) {
    // An int, or what Python indexes with as one (numpy's integers); a float or a str is not.
    PyObject* index = PyNumber_Index(item.ptr());
    if (index == nullptr) {
      PyErr_Clear();
      pa::throw_argument(kPlan, pa::cat("context_lens[", seq, "]"), "an int", std::string(py::repr(item)));
    }
    const py::object as_int = py::reinterpret_steal<py::object>(index);
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
    PA_REQUIRE(overflow == 0 && value >= std::numeric_limits<std::int32_t>::min() &&
                   value <= std::numeric_limits<std::int32_t>::max(),
               kPlan, pa::cat("context_lens[", seq, "]"), "an int32 (a length in [0, max_context_len])",
               std::string(py::str(as_int)));
    lengths.push_back(static_cast<std::int32_t>(value));
    ++seq;
  }
  return lengths;
}

/// pa::plan_decode for \p problem on \p device, with the host copy of the batch's lengths when
/// the constructor's \p given_lengths is not None (host_lengths; a ragged batch then gets step
/// 11): the emulator on the CPU, else the device, made current for the call (the plan reads its
/// limits).
pa::DecodePlan plan_on(const pa::DecodeProblem& problem, const py::object& given_lengths, const at::Device& device) {
  const std::optional<std::vector<std::int32_t>> context_lens = host_lengths(given_lengths);
  // pa::plan_decode takes no lengths (an empty span) for no lengths, so lengths given empty for a
  // batch of sequences are refused here, by the check plan_decode applies to the others.
  if (context_lens && context_lens->empty() && problem.num_seqs > 0) pa::validate_lengths(problem, {}, kPlan);
  const std::span<const std::int32_t> lengths =
      context_lens ? std::span<const std::int32_t>(*context_lens) : std::span<const std::int32_t>();
  if (device.is_cpu()) return pa::plan_decode(problem, lengths, pa::Backend::emulator);
  std::optional<c10::cuda::CUDAGuard> guard;
  if (c10::cuda::device_count() > 0 && pa::gpu::available()) {
    guard.emplace(device.index());
    // The process's device is the one current at its first plan (pa::gpu::device_info): this one,
    // if it is the first.
    const int process = pa::gpu::device_info().ordinal;
    PA_REQUIRE(device.index() == process, kPlan, "device",
               pa::cat("cuda:", process, " (this process's device, that of its first plan: one device a process)"),
               device.str());
  }
  return pa::plan_decode(problem, lengths, pa::Backend::cuda);
}

/// pagedattn.DecodePlan: a pa::DecodePlan, the device it runs on, and its workspace.
class DecodePlan {
 public:
  DecodePlan(int num_seqs, int num_q_heads, int num_kv_heads, int head_dim, int block_size, int max_blocks_per_seq,
             std::int64_t num_blocks, at::ScalarType dtype, std::optional<int> max_context_len,
             std::optional<double> scale, std::optional<std::vector<std::int64_t>> cache_strides,
             std::optional<at::ScalarType> kv_dtype, double k_scale, double v_scale, const py::object& context_lens,
             const py::object& device)
      : device_(plan_device(device)),
        cache_shape_{num_blocks, block_size, num_kv_heads, head_dim},
        cache_strides_(cache_strides.value_or(contiguous_strides(cache_shape_))),
        plan_(plan_on(checked_problem(num_seqs, num_q_heads, num_kv_heads, head_dim, block_size, max_blocks_per_seq,
                                      num_blocks, dtype, max_context_len, scale, kv_dtype, k_scale, v_scale),
                      context_lens, device_)),
        // The scratch every decode with the plan uses (its front is the checked mode's), held as
        // long as the plan: a decode allocates nothing.
        workspace_(at::empty({static_cast<std::int64_t>(plan_.workspace_bytes())},
                             at::TensorOptions().dtype(at::kByte).device(device_))) {
    if (device_.is_cuda()) workspace_stream_ = c10::cuda::getCurrentCUDAStream(device_.index());
  }

  /// One decode step: writes and returns out[s][h] = softmax(q[s][h] · Kᵀ · scale) · V over the
  /// first context_lens[s] tokens of sequence s, read through its row of block_tables.
  at::Tensor decode(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                    const at::Tensor& block_tables, const at::Tensor& context_lens, std::optional<at::Tensor> out,
                    bool checked) const {
    const pa::DecodeProblem& p = plan_.problem();
    const at::ScalarType type = torch_type(p.dtype);
    const at::ScalarType cache_type = torch_type(p.cache_dtype());  // torch.float8_e4m3fn for fp8 K/V
    const std::vector<std::int64_t> io_shape = {p.num_seqs, p.num_q_heads, p.head_dim};
    const std::vector<std::int64_t> table_shape = {p.num_seqs, p.max_blocks_per_seq};
    const char* io_names = "[num_seqs, num_q_heads, head_dim]";
    const char* cache_names = "[num_blocks, block_size, num_kv_heads, head_dim]";
    require(query, {"query", device_, type, io_shape, io_names, contiguous_strides(io_shape), "contiguous"});
    require(key_cache,
            {"key_cache", device_, cache_type, cache_shape_, cache_names, cache_strides_, "the plan's cache_strides"});
    require(value_cache,
            {"value_cache", device_, cache_type, cache_shape_, cache_names, cache_strides_, "the plan's cache_strides"});
    require(block_tables, {"block_tables", device_, at::kInt, table_shape, "[num_seqs, max_blocks_per_seq]",
                           contiguous_strides(table_shape), "contiguous"});
    require(context_lens, {"context_lens", device_, at::kInt, {p.num_seqs}, "[num_seqs]", {1}, "contiguous"});
    at::Tensor result = out ? *out : at::empty(io_shape, query.options());
    require(result, {"out", device_, type, io_shape, io_names, contiguous_strides(io_shape), "contiguous"});

    pa::DecodeView view;
    view.problem = p;
    view.query = query.data_ptr();
    view.key_cache = key_cache.data_ptr();
    view.value_cache = value_cache.data_ptr();
    view.block_tables = block_tables.data_ptr<std::int32_t>();
    view.context_lens = context_lens.data_ptr<std::int32_t>();
    view.out = result.data_ptr();
    view.workspace = workspace_.data_ptr();
    view.workspace_bytes = plan_.workspace_bytes();
    view.checked = checked;
    // What pa::decode checks first (an out overlapping an input), in this function's name.
    pa::validate_view(view, plan_.workspace_bytes(), kDecode);
    if (device_.is_cpu()) {
      pa::decode(plan_, view);  // the emulator: returns when out is written
    } else {
      const c10::cuda::CUDAGuard guard(device_);
      const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device_.index());
      // The workspace was allocated on another stream: torch's allocator must not hand its memory
      // out again, once the plan is gone, before this decode has finished on this stream.
      if (stream != *workspace_stream_) workspace_.record_stream(stream);
      pa::decode(plan_, view, stream.stream());
    }
    return result;
  }

  const pa::DecodePlan& plan() const { return plan_; }
  const at::Device& device() const { return device_; }
  const at::Tensor& workspace() const { return workspace_; }
  std::string repr() const {
    return pa::cat("pagedattn.DecodePlan(", pa::describe(plan_.problem()), " on ", device_.str(), ": ",
                   plan_.description(), ")");
  }

 private:
  /// problem_of with this plan's cache strides; a list of strides that is not 4 long is refused.
  pa::DecodeProblem checked_problem(int num_seqs, int num_q_heads, int num_kv_heads, int head_dim, int block_size,
                                    int max_blocks_per_seq, std::int64_t num_blocks, at::ScalarType dtype,
                                    std::optional<int> max_context_len, std::optional<double> scale,
                                    std::optional<at::ScalarType> kv_dtype, double k_scale, double v_scale) const {
    PA_REQUIRE(cache_strides_.size() == 4, kPlan, "cache_strides",
               "4 strides (of key_cache's [num_blocks, block_size, num_kv_heads, head_dim])",
               c10::IntArrayRef(cache_strides_));
    return problem_of(num_seqs, num_q_heads, num_kv_heads, head_dim, block_size, max_blocks_per_seq, num_blocks,
                        dtype, max_context_len, scale, cache_strides_, kv_dtype, k_scale, v_scale);
  }

  at::Device device_;
  std::vector<std::int64_t> cache_shape_;    // [num_blocks, block_size, num_kv_heads, head_dim]
  std::vector<std::int64_t> cache_strides_;  // of key_cache and value_cache, in elements
  pa::DecodePlan plan_;
  at::Tensor workspace_;  // uint8 [plan_.workspace_bytes()] on device_
  std::optional<c10::cuda::CUDAStream> workspace_stream_;  // the stream workspace_ was allocated on (CUDA)
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "pagedattn's entry point (api/decode.h) for torch tensors: plan once, decode many (docs/pages/pytorch.md)";

  // The project's errors keep their messages. pybind11 tries the newest translator first, so
  // the base is registered before its subclasses. ArgumentError is a ValueError too, which is
  // what Python code catches for a bad argument.
  auto& error = py::register_exception<pa::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<pa::ArgumentError>(m, "ArgumentError", py::make_tuple(error, py::handle(PyExc_ValueError)));
  py::register_exception<pa::CudaError>(m, "CudaError", error);

  py::class_<DecodePlan>(m, "DecodePlan", R"(A decode plan: pa::plan_decode's choice of rung and launch for one batch shape.

Plan once for a batch's shape, then decode with the plan at every step while the shape holds
(a sequence finishing or joining changes num_seqs: plan again). The caches are
[num_blocks, block_size, num_kv_heads, head_dim] (vLLM's FlashAttention layout), contiguous
unless cache_strides (their strides, in elements, dim stride 1) says otherwise.
max_context_len defaults to what a block-table row holds (max_blocks_per_seq * block_size),
scale to 1/sqrt(head_dim), device to the current CUDA device; device='cpu' runs the emulator.
kv_dtype is the caches' dtype: None (the default) or dtype for K/V stored as q is, or
torch.float8_e4m3fn for fp8 K/V (step 12; dtype bfloat16 or float16), where a stored K element x
stands for float(x) * k_scale and a V element for float(x) * v_scale (both 1, the default, unless
K/V are fp8).
context_lens, the host copy of the batch's lengths (a sequence of ints or a CPU torch.int32
tensor, one a sequence), plans with them: a ragged batch (the longest at least 1.5 times the mean)
then gets step 11, whose work list is balanced for these lengths and right for any others.
The plan holds its workspace: decodes with one plan must not run on two streams at once (one
after another on different streams is fine). One GPU a process: a plan for a second one is refused.)")
      .def(py::init<int, int, int, int, int, int, std::int64_t, at::ScalarType, std::optional<int>,
                    std::optional<double>, std::optional<std::vector<std::int64_t>>, std::optional<at::ScalarType>,
                    double, double, const py::object&, const py::object&>(),
           py::arg("num_seqs"), py::arg("num_q_heads"), py::arg("num_kv_heads"), py::arg("head_dim"),
           py::arg("block_size"), py::arg("max_blocks_per_seq"), py::arg("num_blocks"), py::arg("dtype"), py::kw_only(),
           py::arg("max_context_len") = py::none(), py::arg("scale") = py::none(),
           py::arg("cache_strides") = py::none(), py::arg("kv_dtype") = py::none(), py::arg("k_scale") = 1.0,
           py::arg("v_scale") = 1.0, py::arg("context_lens") = py::none(), py::arg("device") = py::none())
      .def("decode", &DecodePlan::decode, R"(One decode step, on the current CUDA stream; returns out.

query and out: [num_seqs, num_q_heads, head_dim], the plan's dtype; key_cache and value_cache:
[num_blocks, block_size, num_kv_heads, head_dim], the plan's kv_dtype; block_tables: int32
[num_seqs, max_blocks_per_seq]; context_lens: int32 [num_seqs]. out is allocated when None.
checked=True checks each context length and used block-table entry on the GPU: a bad one makes
that sequence's row zeros and raises ArgumentError at the first checked decode that starts
after the check has finished on the GPU (that decode launches nothing), or at
pagedattn.raise_table_fault() after a synchronize.)",
           py::arg("query"), py::arg("key_cache"), py::arg("value_cache"), py::arg("block_tables"),
           py::arg("context_lens"), py::arg("out") = py::none(), py::kw_only(), py::arg("checked") = true)
      .def_property_readonly("description", [](const DecodePlan& p) { return p.plan().description(); },
                             "the rung, why it was chosen, and its launch (pa::DecodePlan::description)")
      .def_property_readonly("step", [](const DecodePlan& p) { return p.plan().step(); }, "the rung's ladder number")
      .def_property_readonly("kernel_name", [](const DecodePlan& p) { return std::string(p.plan().kernel().name); },
                             "the rung's name, e.g. step10_tensor_cores")
      .def_property_readonly("weights_in_storage_type",
                             [](const DecodePlan& p) { return p.plan().kernel().weights_in_storage_type; },
                             "whether the rung rounds softmax weights to the storage type before P·V (tensor cores)")
      .def_property_readonly("scale", [](const DecodePlan& p) { return p.plan().problem().scale; })
      .def_property_readonly("kv_dtype", [](const DecodePlan& p) { return torch_type(p.plan().problem().cache_dtype()); },
                             "the dtype key_cache and value_cache must have: dtype, or torch.float8_e4m3fn")
      .def_property_readonly("k_scale", [](const DecodePlan& p) { return p.plan().problem().k_scale; },
                             "what a stored K element is multiplied by (1 unless K/V are fp8), as the kernel reads it")
      .def_property_readonly("v_scale", [](const DecodePlan& p) { return p.plan().problem().v_scale; },
                             "what a stored V element is multiplied by (1 unless K/V are fp8), as the kernel reads it")
      .def_property_readonly("device", &DecodePlan::device)
      .def_property_readonly("workspace", &DecodePlan::workspace, "the plan's scratch, uint8 on its device")
      .def("__repr__", &DecodePlan::repr);

  m.def("raise_table_fault", &pa::gpu::raise_table_fault,
        R"(Raises the ArgumentError of a bad context length or block-table entry that a checked decode
found on the GPU, once the GPU has run it (call it after torch.cuda.synchronize()); returns
None when there is none. The next checked decode raises it too.)");
}
