// Random ops on the device, from a counter-based generator: each draw takes
// the next counter of the tpu generator (seeded by torch.manual_seed) and
// hashes (seed, counter) into a Threefry key, so draws are reproducible, never
// overlap, and the key reaches the program as a parameter (no recompiles).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "backend.h"

namespace etpu {

namespace {

uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default seed

}  // namespace

// The tpu generator: a seed and a counter of draws (its whole state).
class TpuGenerator final : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex index = 0)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index < 0 ? 0 : index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    counter_ = 0;
  }
  void set_offset(uint64_t offset) override { counter_ = offset; }
  uint64_t get_offset() const override { return counter_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = c10::detail::getNonDeterministicRandom();
    set_current_seed(s);
    return s;
  }

  // State: 16 bytes, the seed then the counter (a CPU uint8 tensor, as CUDA's).
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16 && state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                "tpu generator state: expected a uint8 tensor of 16 bytes, got ", state.numel(), " elements of ",
                state.dtype().name());
    const auto* p = static_cast<const uint8_t*>(state.data());
    memcpy(&seed_, p, 8);
    memcpy(&counter_, p + 8, 8);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    memcpy(t.data_ptr<uint8_t>(), &seed_, 8);
    memcpy(t.data_ptr<uint8_t>() + 8, &counter_, 8);
    return t.getIntrusivePtr();
  }

  // The key of the next draw.
  std::pair<uint64_t, uint64_t> next_key() {
    uint64_t c = counter_++;
    return {splitmix64(seed_ ^ splitmix64(c)), c};
  }

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  TpuGenerator* clone_impl() const override {
    auto* g = new TpuGenerator(device().index());
    g->seed_ = seed_;
    g->counter_ = counter_;
    return g;
  }

  uint64_t seed_ = kDefaultSeed;
  uint64_t counter_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::mutex mu;
  static std::vector<at::Generator> generators;
  std::lock_guard<std::mutex> lock(mu);
  size_t i = index < 0 ? 0 : static_cast<size_t>(index);
  while (generators.size() <= i)
    generators.push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(generators.size())));
  return generators[i];
}

at::Generator new_generator(c10::DeviceIndex index) { return at::make_generator<TpuGenerator>(index); }

DrawnKeys draw_keys(c10::DeviceIndex index, size_t n) {
  at::Generator g = default_generator(index);
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* gen = at::check_generator<TpuGenerator>(g);
  DrawnKeys keys;
  keys.counter = gen->get_offset();
  keys.halves.reserve(2 * n);
  for (size_t i = 0; i < n; i++) {
    auto [k0, k1] = gen->next_key();
    keys.halves.push_back(k0);
    keys.halves.push_back(k1);
  }
  return keys;
}

void return_keys(c10::DeviceIndex index, const DrawnKeys& keys) {
  at::Generator g = default_generator(index);
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* gen = at::check_generator<TpuGenerator>(g);
  if (gen->get_offset() == keys.counter + keys.halves.size() / 2) gen->set_offset(keys.counter);
}

namespace {

// The key of the next draw of `gen`, or of `like`'s device's default generator.
std::pair<uint64_t, uint64_t> next_key(const at::Tensor& like, const std::optional<at::Generator>& gen) {
  at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(device_index(like));
  std::lock_guard<std::mutex> lock(g.mutex());
  return at::check_generator<TpuGenerator>(g)->next_key();
}

// The fills: the runtime samples (runtime/src/tensor/random.rs: etpu_sample),
// checks the parameters and names bad ones.
// A complex tensor samples its parts, as the CPU does: uniform parts in
// [from, to), normal parts of std / sqrt(2) (so |z - mean|^2 has variance
// std^2, torch.randn's complex normal).
at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  if (self.is_complex()) {
    at::Tensor parts = at::view_as_real(self);
    uniform_(parts, from, to, std::move(gen));
    return self;
  }
  OpScope s;
  sample("uniform", {at::Scalar(from), at::Scalar(to)}, next_key(self, gen), self);
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  if (self.is_complex()) {
    at::Tensor parts = at::view_as_real(self);
    normal_(parts, mean, std / std::sqrt(2.0), std::move(gen));
    return self;
  }
  OpScope s;
  sample("normal", {at::Scalar(mean), at::Scalar(std)}, next_key(self, gen), self);
  return self;
}

at::Tensor& bernoulli_scalar(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  OpScope s;
  sample("bernoulli", {at::Scalar(p)}, next_key(self, gen), self);
  return self;
}

at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  OpScope s;
  at::Tensor probabilities = p.expand(self.sizes());
  sample("bernoulli", {probabilities}, next_key(self, gen), self);
  return self;
}

at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty_like(self);
  return bernoulli_tensor(out, self, gen);
}

// Integers in [from, to), or in the dtype's range without `to`.
at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  OpScope s;
  if (to.has_value()) {
    sample("integers", {at::Scalar(from), at::Scalar(*to)}, next_key(self, gen), self);
  } else {
    sample("integers", {at::Scalar(from)}, next_key(self, gen), self);
  }
  return self;
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from(self, 0, to, gen);
}

at::Tensor& random_all(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_from(self, 0, std::nullopt, gen);
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  OpScope s;
  sample("exponential", {at::Scalar(lambd)}, next_key(self, gen), self);
  return self;
}

// The keep mask is a bernoulli draw of 1 - p; the output and the gradient are
// the runtime's masked_scale (where(mask, x, 0) * scale).
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  OpScope s;
  at::Tensor out = at::empty_like(input);
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  if (!train.value_or(true) || p == 0 || input.numel() == 0) {
    write(out, read(input));
    write(mask, full(device_index(input), {}, 1, at::kBool));
    return {out, mask};
  }
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  sample("bernoulli", {at::Scalar(1.0 - p)}, next_key(input, std::nullopt), mask);
  pointwise("masked_scale", {input, mask, at::Scalar(p == 1 ? 0.0 : 1.0 / (1.0 - p))}, out);
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  OpScope s;
  at::Tensor out = at::empty_like(grad);
  pointwise("masked_scale", {grad, mask, at::Scalar(scale)}, out);
  return out;
}

// Log-normal, Cauchy and geometric draws as transforms of tpu's normal and
// uniform draws, the transforms PyTorch's CPU kernels apply to theirs (the
// numbers differ, as every tpu draw does; the distributions do not).
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  return self.normal_(mean, std, std::move(gen)).exp_();
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  // median + sigma * tan(pi * (u - 1/2)), in float64 so the tails keep their digits.
  at::Tensor u = at::empty(self.sizes(), self.options().dtype(at::kDouble)).uniform_(0, 1, std::move(gen));
  return self.copy_(u.sub_(0.5).mul_(M_PI).tan_().mul_(sigma).add_(median));
}

at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  // The trials until the first success: ceil(log(1 - u) / log(1 - p)), 1 - u in (0, 1].
  at::Tensor u = at::empty(self.sizes(), self.options().dtype(at::kDouble)).uniform_(0, 1, std::move(gen));
  return self.copy_(at::log1p(u.neg_()).div_(std::log1p(-p)).ceil_());
}

// A uniformly random permutation of 0..n-1: the order of n float64 draws.
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  at::Tensor keys = at::empty({n}, out.options().dtype(at::kDouble)).uniform_(0, 1, std::move(gen));
  return out.copy_(keys.argsort());
}

// torch.multinomial, PyTorch's algorithms on tpu's draws: without
// replacement, the top num_samples of p / Exp(1) (the exponential race, as
// PyTorch's own kernel); with replacement, each uniform draw's place in the
// normalized cumulative distribution (the first category whose cumulative
// probability exceeds it: never one of probability 0). The distribution is
// checked as PyTorch checks it, with one host read of two flags (the CPU
// kernel reads every probability; CUDA asserts on the device).
at::Tensor& multinomial_out(const at::Tensor& self, int64_t n, bool replacement, std::optional<at::Generator> gen,
                            at::Tensor& out) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
  int64_t categories = self.size(-1);
  TORCH_CHECK(replacement || n <= categories, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  std::vector<int64_t> shape = self.sizes().vec();
  shape.back() = n;
  at::native::resize_output(out, shape);
  if (self.numel() == 0) return out;
  at::Tensor p = self.to(at::kDouble);
  at::Tensor bad = (p < 0).logical_or_(p.isinf()).logical_or_(p.isnan()).any();
  at::Tensor empty = (p.sum(-1) <= 0).any();
  at::Tensor flags = at::stack({bad, empty}).cpu();
  TORCH_CHECK(!flags[0].item<bool>(), "probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(!flags[1].item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
  if (!replacement) {
    at::Tensor race = p / at::empty_like(p).exponential_(1, gen);
    return out.copy_(n == 1 ? race.argmax(-1, /*keepdim=*/true) : std::get<1>(race.topk(n)));
  }
  at::Tensor cdf = p.cumsum(-1);
  cdf = cdf / cdf.narrow(-1, categories - 1, 1);
  at::Tensor u = at::empty(shape, p.options()).uniform_(0, 1, std::move(gen));
  at::Tensor picked = at::searchsorted(cdf, u, /*out_int32=*/false, /*right=*/true);
  return out.copy_(picked.clamp_max_(categories - 1));
}

at::Tensor multinomial(const at::Tensor& self, int64_t n, bool replacement, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, n, replacement, std::move(gen), out);
}

// Randomized leaky ReLU (`F.rrelu`), as the CPU kernel: in training, each
// element at or below 0 is multiplied by a slope drawn uniformly from
// [lower, upper] (recorded in `noise`, 1 elsewhere, for the backward); in
// evaluation, leaky ReLU with the mean slope, `noise` untouched.
at::Tensor& rrelu_with_noise_out(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                                 const at::Scalar& upper, bool training, std::optional<at::Generator> generator,
                                 at::Tensor& out) {
  if (!training) {
    double slope = (lower.toDouble() + upper.toDouble()) / 2;
    return at::leaky_relu_out(out, self, slope);
  }
  TORCH_CHECK(noise.sizes() == self.sizes(), "rrelu_with_noise: noise ", noise.sizes(), " for an input ",
              self.sizes());
  at::Tensor slopes = at::empty_like(self).uniform_(lower.toDouble(), upper.toDouble(), generator);
  noise.copy_(at::where(self <= 0, slopes, at::ones_like(slopes)));
  return at::mul_out(out, self, noise);
}

at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                            const at::Scalar& upper, bool training, std::optional<at::Generator> generator) {
  at::Tensor out = at::empty_like(self);
  return rrelu_with_noise_out(self, noise, lower, upper, training, std::move(generator), out);
}

at::Tensor& rrelu_with_noise_(at::Tensor& self, at::Tensor& noise, const at::Scalar& lower, const at::Scalar& upper,
                              bool training, std::optional<at::Generator> generator) {
  return rrelu_with_noise_out(self, noise, lower, upper, training, std::move(generator), self);
}

// Samplers with parameters per element, each the runtime's rejection loop
// (fusion/src/lower/random.rs): torch._standard_gamma (what Gamma, Beta,
// Chi2 and Dirichlet sample through), torch.poisson and torch.binomial.
// Float16 and bfloat16 are drawn in float32 (the CPU has no gamma for them).
at::Tensor standard_gamma(const at::Tensor& self, std::optional<at::Generator> gen) {
  OpScope s;
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  sample("gamma", {self}, next_key(self, gen), out);
  return out;
}

// A Dirichlet sample per row (the last dim): gamma samples normalized to sum
// to 1, each share kept in [smallest normal, largest value below 1], as the
// CPU (gammas are at least the smallest normal, so a row of zeros gives equal
// shares).
at::Tensor sample_dirichlet(const at::Tensor& self, std::optional<at::Generator> gen) {
  OpScope s;
  at::Tensor gamma = standard_gamma(self, std::move(gen));
  at::Tensor shares = gamma / gamma.sum(-1, /*keepdim=*/true);
  double smallest = 0, below_one = 1;
  switch (self.scalar_type()) {
    case at::kDouble:
      smallest = std::numeric_limits<double>::min();
      below_one = std::nextafter(1.0, 0.0);
      break;
    case at::kHalf:
      smallest = static_cast<double>(std::numeric_limits<c10::Half>::min());
      below_one = 1 - std::ldexp(1.0, -11);
      break;
    case at::kBFloat16:
      smallest = static_cast<double>(std::numeric_limits<c10::BFloat16>::min());
      below_one = 1 - std::ldexp(1.0, -8);
      break;
    default:
      smallest = std::numeric_limits<float>::min();
      below_one = std::nextafter(1.0f, 0.0f);
  }
  return shares.clamp_(smallest, below_one);
}

// As the CPU, a negative or NaN rate is an error: one host read of a flag
// (CUDA asserts on the device). An infinite rate gives NaN (the CPU gives
// int64's minimum).
at::Tensor poisson(const at::Tensor& self, std::optional<at::Generator> gen) {
  OpScope s;
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "poisson: expected a floating-point rate tensor, got ",
              self.scalar_type());
  if (self.numel() > 0) {
    bool bad = (self < 0).logical_or_(self.isnan()).any().item<bool>();
    TORCH_CHECK(!bad, "invalid Poisson rate, expected rate to be non-negative");
  }
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  sample("poisson", {self}, next_key(self, gen), out);
  return out;
}

// rsample()'s backward through a gamma sample (Gamma, Beta, Chi2): the op
// table's `_standard_gamma_grad` (its out= form registered with the tables).
at::Tensor standard_gamma_grad(const at::Tensor& self, const at::Tensor& output) {
  OpScope s;
  at::Tensor out = at::empty(at::infer_size(self.sizes(), output.sizes()), self.options());
  pointwise("_standard_gamma_grad", {self, output}, out);
  return out;
}

// What Dirichlet's and Beta's rsample() backward combines: the scaled
// reparameterized gradient of Beta(alpha, total - alpha) samples (the
// runtime's op).
at::Tensor dirichlet_grad(const at::Tensor& x, const at::Tensor& alpha, const at::Tensor& total) {
  OpScope s;
  at::Tensor out = at::empty(x.sizes(), x.options());
  pointwise("_dirichlet_grad", {x, alpha, total}, out);
  return out;
}

at::Tensor& dirichlet_grad_out(const at::Tensor& x, const at::Tensor& alpha, const at::Tensor& total,
                               at::Tensor& out) {
  at::Tensor g = dirichlet_grad(x, alpha, total);
  at::native::resize_output(out, g.sizes());
  return out.copy_(g);
}

// Binomial samples: float counts and probabilities of one dtype, broadcast
// (as the CPU). A NaN count gives NaN (the CPU loops forever).
at::Tensor binomial_sample(const at::Tensor& count, const at::Tensor& prob, std::optional<at::Generator> gen) {
  OpScope s;
  TORCH_CHECK(at::isFloatingType(count.scalar_type()), "binomial only supports floating-point dtypes for count, got: ",
              count.scalar_type());
  TORCH_CHECK(prob.scalar_type() == count.scalar_type(), "binomial: found dtype ", prob.scalar_type(),
              " for prob but expected ", count.scalar_type(), " (count's)");
  at::Tensor out = at::empty(at::infer_size(count.sizes(), prob.sizes()), count.options());
  sample("binomial", {count, prob}, next_key(count, gen), out);
  return out;
}

at::Tensor& binomial_out(const at::Tensor& count, const at::Tensor& prob, std::optional<at::Generator> gen,
                         at::Tensor& out) {
  at::Tensor result = binomial_sample(count, prob, std::move(gen));
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

// The out= forms of gamma, Dirichlet and Poisson: the sample, then copied
// into `out` (resized as PyTorch resizes outputs).
template <at::Tensor (*Sampler)(const at::Tensor&, std::optional<at::Generator>)>
at::Tensor& sampled_out(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out) {
  at::Tensor result = Sampler(self, std::move(gen));
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("multinomial", multinomial);
  m.impl("_standard_gamma", standard_gamma);
  m.impl("_standard_gamma.out", sampled_out<standard_gamma>);
  m.impl("_sample_dirichlet", sample_dirichlet);
  m.impl("_sample_dirichlet.out", sampled_out<sample_dirichlet>);
  m.impl("poisson", poisson);
  m.impl("poisson.out", sampled_out<poisson>);
  m.impl("binomial", binomial_sample);
  m.impl("_standard_gamma_grad", standard_gamma_grad);
  m.impl("_dirichlet_grad", dirichlet_grad);
  m.impl("_dirichlet_grad.out", dirichlet_grad_out);
  m.impl("binomial.out", binomial_out);
  m.impl("multinomial.out", multinomial_out);
  m.impl("log_normal_", log_normal_);
  m.impl("cauchy_", cauchy_);
  m.impl("geometric_", geometric_);
  m.impl("randperm.generator_out", randperm_out);
  m.impl("rrelu_with_noise", rrelu_with_noise);
  m.impl("rrelu_with_noise_", rrelu_with_noise_);
  m.impl("rrelu_with_noise.out", rrelu_with_noise_out);
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("bernoulli_.float", bernoulli_scalar);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("bernoulli", bernoulli);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("random_", random_all);
  m.impl("exponential_", exponential_);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
}

// ------------------------------------------------ torch.tpu's generators ----
// torch.tpu.manual_seed, initial_seed, get_rng_state and set_rng_state call
// these as torch.ops.eagertpu.* (schemas the dispatcher checks). A seed is 64
// bits: it crosses as an int64 with the same bits.
namespace etpu {
namespace {

// The default generators of `device` (-1: every device).
std::vector<at::Generator> generators(int64_t device) {
  int64_t n = 0;
  check(eagertpu_device_count(&n));
  TORCH_CHECK(device >= -1 && device < n, "tpu device ", device, " does not exist (", n, " devices)");
  std::vector<at::Generator> out;
  for (int64_t i = 0; i < n; i++)
    if (device < 0 || i == device) out.push_back(default_generator(static_cast<c10::DeviceIndex>(i)));
  return out;
}

void manual_seed_op(int64_t device, int64_t seed) {
  for (at::Generator& g : generators(device)) {
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(static_cast<uint64_t>(seed));
  }
}

int64_t initial_seed_op(int64_t device) {
  TORCH_CHECK(device >= 0, "initial_seed takes one device, got ", device);
  return static_cast<int64_t>(generators(device).front().current_seed());
}

// 16 bytes: the seed and the draw counter (little-endian uint64s).
at::Tensor get_rng_state_op(int64_t device) {
  TORCH_CHECK(device >= 0, "get_rng_state takes one device, got ", device);
  at::Generator g = generators(device).front();
  std::lock_guard<std::mutex> lock(g.mutex());
  uint64_t state[2] = {g.current_seed(), g.get_offset()};
  at::Tensor out = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  memcpy(out.mutable_data_ptr(), state, sizeof state);
  return out;
}

void set_rng_state_op(int64_t device, const at::Tensor& state) {
  TORCH_CHECK(device >= 0, "set_rng_state takes one device, got ", device);
  TORCH_CHECK(state.device().is_cpu() && state.scalar_type() == at::kByte && state.numel() == 16,
              "a tpu generator state is a CPU uint8 tensor of 16 bytes, got ", state.scalar_type(), state.sizes(),
              " on ", state.device());
  at::Tensor bytes = state.contiguous();
  uint64_t words[2];
  memcpy(words, bytes.const_data_ptr(), sizeof words);
  at::Generator g = generators(device).front();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(words[0]);
  g.set_offset(words[1]);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_FRAGMENT(eagertpu, m) {
  m.def("manual_seed(int device, int seed) -> ()", &etpu::manual_seed_op);
  m.def("initial_seed(int device) -> int", &etpu::initial_seed_op);
  m.def("get_rng_state(int device) -> Tensor", &etpu::get_rng_state_op);
  m.def("set_rng_state(int device, Tensor state) -> ()", &etpu::set_rng_state_op);
}
