// The `tpu` device: an allocator handing out addresses in a reserved, never
// mapped range (each allocation registered with the runtime as a storage),
// a device guard, and the PrivateUse1 hooks.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/flat_hash_map.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

// 1 TiB of address space, reserved but never mapped: dereferencing a `tpu`
// pointer on the host faults at once.
constexpr size_t kReserved = size_t{1} << 40;
constexpr size_t kAlign = 256;

// Addresses for allocations: sizes rounded to kAlign, freed ranges reused by
// size. Each allocation is also findable by its address (`copy_data` gets
// addresses only).
class AddressSpace {
 public:
  uintptr_t take(size_t size, Allocation* owner) {
    std::lock_guard<std::mutex> lock(mu_);
    if (base_ == 0) {
      void* p = mmap(nullptr, kReserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      TORCH_CHECK(p != MAP_FAILED, "tpu: cannot reserve address space for tensors");
      base_ = reinterpret_cast<uintptr_t>(p);
    }
    uintptr_t a;
    auto& free_list = free_[size];
    if (!free_list.empty()) {
      a = free_list.back();
      free_list.pop_back();
    } else {
      TORCH_CHECK(next_ + size <= kReserved, "tpu: out of reserved address space (", kReserved, " bytes)");
      a = base_ + next_;
      next_ += size;
    }
    live_[a] = owner;
    return a;
  }

  void give_back(uintptr_t a, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_.erase(a) == 1) free_[size].push_back(a);
  }

  // The allocation at base address `a`, or nullptr.
  Allocation* find(uintptr_t a) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(a);
    return it == live_.end() ? nullptr : it->second;
  }

 private:
  std::mutex mu_;
  uintptr_t base_ = 0;
  size_t next_ = 0;
  // Open addressing (no node allocated per entry): every tensor an op
  // returns takes an address and gives it back.
  ska::flat_hash_map<size_t, std::vector<uintptr_t>> free_;
  ska::flat_hash_map<uintptr_t, Allocation*> live_;
};

AddressSpace& addresses() {
  static auto* a = new AddressSpace();  // lives for the process
  return *a;
}

thread_local c10::DeviceIndex current_device = 0;

// Streams and events. EagerTPU runs a device's ops in the order they are
// issued (one op stream per device), so every torch stream of a device is a
// name for that order: work issued after a wait is already after what was
// recorded before it, and an event is "recorded" as soon as it is issued.
// Streams buy ordering (always kept), never overlap. Ids are per process;
// the current stream is per thread and device, as in CUDA.
constexpr size_t kMaxDevices = 64;
thread_local std::array<c10::StreamId, kMaxDevices> current_streams{};
std::atomic<c10::StreamId> next_stream{1};
char event_marker;  // what every recorded event points at

c10::DeviceIndex device_count() {
  int64_t n = 0;
  if (eagertpu_device_count(&n) != ETPU_OK) return 0;
  return static_cast<c10::DeviceIndex>(n);
}

void free_allocation(void* ctx) {
  auto* a = static_cast<Allocation*>(ctx);
  etpu_storage_free(a->storage);
  addresses().give_back(a->address, a->size);
  delete a;
}

// The allocation holding base address `p` (an allocation of this allocator).
const Allocation& allocation_at(const void* p) {
  const Allocation* a = addresses().find(reinterpret_cast<uintptr_t>(p));
  TORCH_CHECK(a != nullptr, "tpu: ", p, " is not the base address of a tpu allocation");
  return *a;
}

// A DataPtr's context is its Allocation (the runtime's storage id and the
// address range), so a kernel names the storage it reads without a search.
// Its data pointer is not its context: PyTorch's raw_allocate and
// copy-on-write storages (which need them equal) are not used for `tpu`.
struct TpuAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, &free_nothing, c10::Device(c10::DeviceType::PrivateUse1, current_device)};
    etpu_storage storage = 0;
    check(etpu_storage_new(current_device, nbytes, &storage));
    return adopt_storage(storage, nbytes, current_device);
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // Between two whole storages (a clone or a resize), element by element.
    if (count == 0) return;
    check(etpu_storage_copy(allocation_at(dest).storage, allocation_at(src).storage, count));
  }

  static void free_nothing(void*) {}
};

TpuAllocator allocator;

struct TpuGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }

  c10::Device getDevice() const override { return c10::Device(c10::DeviceType::PrivateUse1, current_device); }

  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "expected a tpu device, got ", d);
    if (d.index() >= 0) current_device = d.index();
  }

  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) current_device = d.index();
  }

  static c10::Device concrete(c10::Device d) {
    return d.index() >= 0 ? d : c10::Device(c10::DeviceType::PrivateUse1, current_device);
  }

  c10::Stream getStream(c10::Device d) const noexcept override {
    d = concrete(d);
    return c10::Stream(c10::Stream::UNSAFE, d, current_streams[static_cast<size_t>(d.index()) % kMaxDevices]);
  }

  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, concrete(d)); }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return getNewStream(d, 0); }

  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::UNSAFE, concrete(d), next_stream.fetch_add(1));
  }

  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    c10::Stream old = getStream(s.device());
    current_streams[static_cast<size_t>(old.device_index()) % kMaxDevices] = s.id();
    return old;
  }

  // An event is the runtime's (etpu_event): recording one launches what is
  // pending on the device, and it completes when the work launched before it
  // does. Timing events (torch.Event(enable_timing=True): BACKEND_DEFAULT)
  // note when that work finished.
  static etpu_event handle(void* event) { return static_cast<etpu_event>(reinterpret_cast<uintptr_t>(event)); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "recording an event of tpu:",
                device_index, " on a stream of tpu:", stream.device_index());
    etpu_event fresh = 0;
    check(etpu_event_record(stream.device_index(), flag == c10::EventFlag::BACKEND_DEFAULT ? 1 : 0, &fresh));
    if (*event != nullptr) etpu_event_free(handle(*event));
    *event = reinterpret_cast<void*>(static_cast<uintptr_t>(fresh));
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (event != nullptr) etpu_event_free(handle(event));
  }

  // The stream's later work is issued after the record: already ordered.
  void block(void*, const c10::Stream&) const override {}

  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    bool done = false;
    check(etpu_event_query(handle(event), &done));
    return done;
  }

  void synchronizeEvent(void* event) const override {
    if (event != nullptr) check(etpu_event_synchronize(handle(event)));
  }

  // Values stay alive while any recorded op reads them (the runtime counts
  // its references): nothing to record.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}

  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr, "Both events must be recorded before calculating elapsed time.");
    double ms = 0;
    check(etpu_event_elapsed_ms(handle(start), handle(end), &ms));
    return ms;
  }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  bool queryStream(const c10::Stream&) const override { return true; }

  void synchronizeStream(const c10::Stream&) const override { check(eagertpu_sync()); }

  void synchronizeDevice(c10::DeviceIndex) const override { check(eagertpu_sync()); }
};

struct TpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device; }
  void setCurrentDevice(c10::DeviceIndex d) const override { current_device = d; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = current_device;
    current_device = d;
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(c10::DeviceType::PrivateUse1, 0); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override { return default_generator(index); }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override { return new_generator(index); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    // Grow (or shrink) a storage: a new allocation holding the old bytes.
    c10::DataPtr fresh = allocator.allocate(newsize);
    size_t kept = std::min(newsize, storage.nbytes());
    if (kept > 0) check(etpu_storage_copy(storage_id(fresh), storage_id(storage.data_ptr()), kept));
    const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
    const_cast<c10::Storage&>(storage).set_nbytes(newsize);
  }
};

}  // namespace

c10::Allocator* tpu_allocator() { return &allocator; }

// An address range of its own for the allocation (backend.h).
c10::DataPtr adopt_storage(etpu_storage storage, size_t nbytes, c10::DeviceIndex index) {
  auto owner = std::make_unique<Allocation>();
  owner->storage = storage;
  owner->size = (nbytes + kAlign - 1) / kAlign * kAlign;
  try {
    owner->address = addresses().take(owner->size, owner.get());
  } catch (...) {
    etpu_storage_free(storage);
    throw;
  }
  void* p = reinterpret_cast<void*>(owner->address);
  return {p, owner.release(), &free_allocation, c10::Device(c10::DeviceType::PrivateUse1, index)};
}

etpu_storage storage_id(const c10::DataPtr& p) {
  TORCH_CHECK(p.get_deleter() == &free_allocation, "tpu: a storage at ", p.get(),
              " that the tpu allocator did not make (its context is not a tpu allocation)");
  return static_cast<const Allocation*>(p.get_context())->storage;
}

}  // namespace etpu

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &etpu::allocator);
C10_REGISTER_GUARD_IMPL(PrivateUse1, etpu::TpuGuard);

namespace {
struct RegisterHooks {
  RegisterHooks() {
    static etpu::TpuHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
} register_hooks;
}  // namespace
