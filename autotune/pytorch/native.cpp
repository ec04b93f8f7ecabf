// Products of torch tensors seen before, launched from C++ (native.py says how plans are armed and
// lapse). A plan is the Python road's cached launch (dispatch/shortcut.py) for one key: each step's
// kernel, grid and arguments, A's, B's, C's pointers and alpha filled in at the call; it keeps the
// kernel's module and workspace alive. cuBLAS's plan is torch's mm (the same library), TF32 off.
// The operator autotune::matmul's CUDA and AutogradCUDA kernels are here too: a plan serves a call
// on plain CUDA tensors (a compiled graph's: no Python), with a C++ node where a gradient is to be
// recorded; the Python kernels handed over serve the rest (no plan, fake tensors, modes, functorch).
#include <torch/extension.h>
#include <torch/library.h>

#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using Launch = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                       void**, void**);
Launch launch_kernel = nullptr;  // the driver's cuLaunchKernel, given by native.py
int (*is_capturing)(void*, int*) = nullptr;  // the driver's cuStreamIsCapturing

// An argument's kind: a constant of a C type, or a value of the call.
enum Kind : int64_t { I32 = 0, I64 = 1, F32 = 2, PTR = 3, A_PTR = 4, B_PTR = 5, C_PTR = 6, ALPHA = 7 };
constexpr size_t MAX_ARGS = 64;
constexpr size_t MAX_PLANS = 4096;  // past it every plan goes; the Python road arms them again
// CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_CONTEXT: a thread with no current context, which
// the Python road binds (dispatch/arrays.bind_context) before it launches.
constexpr int NO_CONTEXT[] = {3, 201};

struct Step {
  void* fn;
  unsigned grid[3];
  unsigned block;
  unsigned smem;
  std::vector<int64_t> kinds, values;
};

struct Plan {
  int64_t rows, cols, deadline_ns;
  std::vector<Step> steps;
  py::object keep;  // the kernel and the workspace the steps point into
  bool captured = false;  // a CUDA graph holds a launch of it: its workspace is never freed
  bool by_torch = false;  // cuBLAS's: torch's mm, no steps
};

struct Key {
  int64_t v[12];
  bool operator==(const Key& o) const { return std::memcmp(v, o.v, sizeof v) == 0; }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
    for (int64_t x : k.v) {
      h ^= static_cast<uint64_t>(x);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

// Never destroyed: their Python objects must not be released after Python ends (native.py clears
// the plans at exit).
auto& plans = *new std::unordered_map<Key, Plan, KeyHash>();
auto& kept = *new std::vector<py::object>();  // what graphs captured, of plans since dropped
auto& python_product = *new py::object();  // impl.cuda_product: a CUDA call no plan serves
auto& python_autograd = *new py::object();  // op.py's Autograd kernel (keyset, args...), or None
auto& tiers = *new std::vector<std::string>();  // native.TIERS's names by number
std::atomic<int64_t> hits{0};  // calls a plan served
// The operator's kernels run without the GIL: plans are read and changed under this lock, and
// nothing holding it takes the GIL.
std::mutex mu;
std::atomic<bool> serving{true};  // false while a recording (pytorch/record.py) must see each call

void drop(Plan& p) {
  if (p.captured) kept.push_back(std::move(p.keep));
}

void clear_plans() {  // the lock held
  for (auto& kv : plans) drop(kv.second);
  plans.clear();
}

void clear() {
  std::lock_guard<std::mutex> lock(mu);
  clear_plans();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The key of a call, or false where no plan can serve it: not two float32 CUDA matrices on the
// current device.
bool make_key(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb, int64_t tier, Key& k, void*& stream) {
  if (a.dim() != 2 || b.dim() != 2 || a.layout() != c10::kStrided || b.layout() != c10::kStrided) return false;
  if (a.scalar_type() != at::kFloat || b.scalar_type() != at::kFloat || !a.is_cuda() || a.device() != b.device())
    return false;
  auto dev = a.device().index();
  if (dev != c10::cuda::current_device()) return false;  // the launch goes to the current context
  stream = c10::cuda::getCurrentCUDAStream(dev).stream();
  auto pa = reinterpret_cast<uintptr_t>(a.data_ptr()), pb = reinterpret_cast<uintptr_t>(b.data_ptr());
  int64_t v[12] = {a.size(0), a.size(1), a.stride(0), a.stride(1), b.size(0), b.size(1), b.stride(0), b.stride(1),
                   dev, (ta ? 1 : 0) | (tb ? 2 : 0) | (tier << 2), static_cast<int64_t>((pa & 15) | (pb & 15) << 4),
                   reinterpret_cast<int64_t>(stream)};
  std::memcpy(k.v, v, sizeof v);
  return true;
}

// alpha op(a) op(b) by the plan of this call, or an undefined tensor where none serves it.
at::Tensor serve(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb, int64_t tier, double alpha) {
  Key k;
  void* stream = nullptr;
  if (launch_kernel == nullptr || tier < 0 || !make_key(a, b, ta, tb, tier, k, stream)) return {};
  std::unique_lock<std::mutex> lock(mu);
  auto it = plans.find(k);
  if (it == plans.end() || now_ns() > it->second.deadline_ns) return {};
  Plan& p = it->second;
  if (p.by_torch) {
    const int64_t rows = p.rows, cols = p.cols;
    lock.unlock();
    bool tf32 = true;  // a setting torch cannot read (legacy and new ones mixed) counts as TF32
    try {
      tf32 = at::globalContext().allowTF32CuBLAS();
    } catch (const std::exception&) {
    }
    if (tf32) return {};  // torch's mm would not be strict FP32: the Python road's cuBLAS serves
    at::Tensor c = at::empty({rows, cols}, a.options());
    at::mm_out(c, ta ? a.t() : a, tb ? b.t() : b);
    ++hits;
    return alpha == 1.0 ? c : c.mul_(alpha);
  }
  int status = 0;  // an error (a stream that cannot say) counts as a capture; once is enough
  if (!p.captured && (is_capturing == nullptr || is_capturing(stream, &status) != 0 || status != 0)) p.captured = true;
  at::Tensor c = at::empty({p.rows, p.cols}, a.options());
  const uint64_t ptrs[3] = {reinterpret_cast<uint64_t>(a.data_ptr()), reinterpret_cast<uint64_t>(b.data_ptr()),
                            reinterpret_cast<uint64_t>(c.data_ptr())};
  const float scale = static_cast<float>(alpha);
  union Slot {
    int32_t i32;
    int64_t i64;
    float f32;
    uint64_t ptr;
  } slots[MAX_ARGS];
  void* params[MAX_ARGS];
  bool first = true;
  for (const Step& s : p.steps) {
    for (size_t i = 0; i < s.kinds.size(); ++i) {
      const int64_t v = s.values[i];
      switch (s.kinds[i]) {
        case I32: slots[i].i32 = static_cast<int32_t>(v); break;
        case I64: slots[i].i64 = v; break;
        case F32: std::memcpy(&slots[i].f32, &v, sizeof(float)); break;
        case PTR: slots[i].ptr = static_cast<uint64_t>(v); break;
        case ALPHA: slots[i].f32 = scale; break;
        default: slots[i].ptr = ptrs[s.kinds[i] - A_PTR]; break;  // A_PTR, B_PTR, C_PTR
      }
      params[i] = &slots[i];
    }
    int rc = launch_kernel(s.fn, s.grid[0], s.grid[1], s.grid[2], s.block, 1, 1, s.smem, stream, params, nullptr);
    if (rc != 0) {
      if (first && (rc == NO_CONTEXT[0] || rc == NO_CONTEXT[1])) return {};  // nothing was queued
      TORCH_CHECK(false, "autotune: cuLaunchKernel failed with CUDA error ", rc);
    }
    first = false;
  }
  ++hits;
  return c;
}

// impl.cuda_product's call: a plan's answer, or None.
py::object product(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb, int64_t tier, double alpha) {
  at::Tensor c;
  {
    py::gil_scoped_release free;  // the lock is taken GIL-free, as by the operator
    c = serve(a, b, ta, tb, tier, alpha);
  }
  return c.defined() ? py::cast(c) : py::none();
}

int64_t tier_of(c10::string_view precision) {
  for (size_t i = 0; i < tiers.size(); ++i)
    if (precision == tiers[i]) return static_cast<int64_t>(i);
  return -1;
}

bool in_place(const at::Tensor& x) {
  if (x.dim() != 2) return true;
  const int64_t r = x.size(0), c = x.size(1), s0 = x.stride(0), s1 = x.stride(1);
  return (s1 == 1 && (r == 1 || s0 >= c)) || (s0 == 1 && (c == 1 || s1 >= r));
}

// The operator's CUDA kernel: a plan's answer, else impl.cuda_product's.
at::Tensor operator_cuda(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb, double alpha,
                         c10::string_view precision) {
  if (serving.load(std::memory_order_relaxed)) {
    at::Tensor c = serve(a, b, ta, tb, tier_of(precision), alpha);
    if (c.defined()) return c;
    if (!in_place(a) || !in_place(b))  // no plan ever serves x (arrays._as_stored): its copy's may
      return operator_cuda(in_place(a) ? a : a.contiguous(), in_place(b) ? b : b.contiguous(), ta, tb, alpha, precision);
  }
  py::gil_scoped_acquire gil;
  return python_product(a, b, ta, tb, alpha, std::string(precision)).cast<at::Tensor>();
}

// The operator through the dispatcher: a gradient's product (recorded again under create_graph).
at::Tensor call_operator(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb, double alpha,
                         c10::string_view precision) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("autotune::matmul", "").typed<at::Tensor(
      const at::Tensor&, const at::Tensor&, bool, bool, double, c10::string_view)>();
  return op.call(a, b, ta, tb, alpha, precision);
}

// The operator's autograd node: impl.gradients's formulas, each gradient a product of the operator.
struct ProductNode : public torch::autograd::Function<ProductNode> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, bool ta,
                            bool tb, double alpha, const std::string& precision) {
    // dA reads only B, dB only A: keep no tensor a gradient will not read.
    ctx->save_for_backward({ctx->needs_input_grad(0) ? b : at::Tensor(), ctx->needs_input_grad(1) ? a : at::Tensor()});
    ctx->saved_data["flags"] = std::make_tuple(ta, tb, alpha, precision);
    return operator_cuda(a, b, ta, tb, alpha, precision);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &b = saved[0], &a = saved[1], &dc = grads[0];
    const auto [ta, tb, alpha, precision] = ctx->saved_data["flags"].to<std::tuple<bool, bool, double, std::string>>();
    at::Tensor da, db;
    // nn/nt: dA = dC op(B)^T;  tn/tt: dA = (dC op(B)^T)^T = op(B) dC^T
    if (ctx->needs_input_grad(0))
      da = ta ? call_operator(b, dc, tb, true, alpha, precision) : call_operator(dc, b, false, !tb, alpha, precision);
    // nn/tn: dB = op(A)^T dC;  nt/tt: dB = (op(A)^T dC)^T = dC^T op(A)
    if (ctx->needs_input_grad(1))
      db = tb ? call_operator(dc, a, true, ta, alpha, precision) : call_operator(a, dc, !ta, false, alpha, precision);
    return {da, db, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Whether functorch is in play: a transform on (vmap, grad), or an operand one left wrapped. C++
// nodes refuse transforms; op.py's kernel takes both.
bool functorch(const at::Tensor& a, const at::Tensor& b) {
  using K = c10::DispatchKey;
  const auto on = c10::impl::tls_local_dispatch_key_set().included_;
  return on.has(K::FuncTorchDynamicLayerFrontMode) || on.has(K::FuncTorchDynamicLayerBackMode) ||
         a.key_set().has(K::FuncTorchGradWrapper) || b.key_set().has(K::FuncTorchGradWrapper);
}

// The operator's AutogradCUDA kernel, for plain CUDA tensors (as op.py's Autograd kernel does):
// the CUDA kernel's answer with no gradient to record, else ProductNode's; op.py's for the rest.
at::Tensor operator_autograd(c10::DispatchKeySet ks, const at::Tensor& a, const at::Tensor& b, bool ta, bool tb,
                             double alpha, c10::string_view precision) {
  if ((ks & c10::after_ADInplaceOrView_keyset).highestPriorityTypeId() == c10::DispatchKey::CUDA) {
    if (!at::GradMode::is_enabled() || !(a.requires_grad() || b.requires_grad()))
      return operator_cuda(a, b, ta, tb, alpha, precision);
    if (!functorch(a, b)) return ProductNode::apply(a, b, ta, tb, alpha, std::string(precision));
  }
  py::gil_scoped_acquire gil;
  return python_autograd(ks, a, b, ta, tb, alpha, std::string(precision)).cast<at::Tensor>();
}

// Serve the operator from here, once a process (native.hand_over: what it is handed).
void serve_operator(py::object product, py::object autograd, const std::vector<std::string>& names) {
  static bool done = false;
  TORCH_CHECK(!done, "autotune: the operator is served from C++ already");
  done = true;
  tiers = names;
  python_product = std::move(product);
  python_autograd = std::move(autograd);
  // Never destroyed: a registration lasts as long as its Library.
  auto* cuda = new torch::Library(torch::Library::IMPL, "autotune", c10::DispatchKey::CUDA, __FILE__, __LINE__);
  cuda->impl("matmul", TORCH_FN(operator_cuda));
  if (!python_autograd.is_none()) {
    auto* ad = new torch::Library(torch::Library::IMPL, "autotune", c10::DispatchKey::AutogradCUDA, __FILE__, __LINE__);
    ad->impl("matmul", TORCH_FN(operator_autograd));
  }
}

void put(const Key& k, Plan&& p) {
  std::lock_guard<std::mutex> lock(mu);
  auto old = plans.find(k);
  if (old != plans.end()) {  // a lapsed plan armed again, as a rule with the same workspace
    if (old->second.keep.is(p.keep))
      p.captured = old->second.captured;
    else
      drop(old->second);
  } else if (plans.size() >= MAX_PLANS) {
    clear_plans();
  }
  plans[k] = std::move(p);
}

// Arm the plan of (a, b, ta, tb, tier) for ttl_ns: each step a list
// [fn, grid x, grid y, grid z, block, dynamic smem, kind 0, value 0, kind 1, value 1, ...].
void arm(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb, int64_t tier, int64_t rows, int64_t cols,
         const std::vector<std::vector<int64_t>>& steps, py::object keep, int64_t ttl_ns) {
  Key k;
  void* stream = nullptr;
  TORCH_CHECK(make_key(a, b, ta, tb, tier, k, stream), "autotune: a plan is for two float32 CUDA matrices");
  Plan p{rows, cols, now_ns() + ttl_ns, {}, std::move(keep)};
  for (const auto& s : steps) {
    TORCH_CHECK(s.size() >= 6 && s.size() % 2 == 0 && (s.size() - 6) / 2 <= MAX_ARGS, "autotune: a malformed step");
    Step st{reinterpret_cast<void*>(s[0]),
            {static_cast<unsigned>(s[1]), static_cast<unsigned>(s[2]), static_cast<unsigned>(s[3])},
            static_cast<unsigned>(s[4]),
            static_cast<unsigned>(s[5]),
            {},
            {}};
    for (size_t i = 6; i < s.size(); i += 2) {
      TORCH_CHECK(s[i] >= I32 && s[i] <= ALPHA, "autotune: an unknown argument kind ", s[i]);
      st.kinds.push_back(s[i]);
      st.values.push_back(s[i + 1]);
    }
    p.steps.push_back(std::move(st));
  }
  put(k, std::move(p));
}

// Arm the plan of a call that cuBLAS served: torch's mm into a new rows x cols tensor.
void arm_torch(const at::Tensor& a, const at::Tensor& b, bool ta, bool tb, int64_t tier, int64_t rows, int64_t cols,
               py::object keep, int64_t ttl_ns) {
  Key k;
  void* stream = nullptr;
  TORCH_CHECK(make_key(a, b, ta, tb, tier, k, stream), "autotune: a plan is for two float32 CUDA matrices");
  Plan p{rows, cols, now_ns() + ttl_ns, {}, std::move(keep)};
  p.by_torch = true;
  put(k, std::move(p));
}

void set_driver(int64_t launch, int64_t query) {
  launch_kernel = reinterpret_cast<Launch>(launch);
  is_capturing = reinterpret_cast<int (*)(void*, int*)>(query);
}
void set_serving(bool on) { serving.store(on); }
int64_t size() {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int64_t>(plans.size());
}
int64_t hit_count() { return hits.load(); }
int64_t kept_count() {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int64_t>(kept.size());
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("product", &product, "alpha op(a) op(b) by an armed plan, or None");
  m.def("arm", &arm, "arm the plan of a call");
  m.def("arm_torch", &arm_torch, "arm the plan of a call cuBLAS served: torch's mm");
  m.def("serve_operator", &serve_operator, "serve autotune::matmul's CUDA (and AutogradCUDA) kernels");
  m.def("set_serving", &set_serving, "whether plans serve the operator (off while recording)");
  m.def("set_driver", &set_driver, "the driver's cuLaunchKernel and cuStreamIsCapturing");
  m.def("clear", &clear, "drop every plan (a graph's workspaces kept)");
  m.def("size", &size, "plans armed");
  m.def("hits", &hit_count, "products served");
  m.def("kept", &kept_count, "workspaces kept for graphs");
}
