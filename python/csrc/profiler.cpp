// torch.profiler on tpu: a Kineto activity profiler for the PrivateUse1
// device (PyTorch's own plugin path, REGISTER_PRIVATEUSE1_PROFILER), so a
// trace of `torch.profiler.profile(activities=[CPU, PrivateUse1])` shows what
// the runtime did beside the CPU ops that caused it: compiles and loads from
// the disk cache, executions (from launch until the plugin reports the
// outputs ready: the device's time), host reads and copies to the device.
// Each carries the user's line it is blamed on ("origin") and what it was
// about ("detail") as trace arguments. The runtime records them while a
// session runs (etpu_trace_start/stop); this file turns them into Kineto
// activities, on a row per kind.
// PyTorch's wheels are built with Kineto; its plugin header needs this.
#define USE_KINETO 1
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

using libkineto::ActivityType;

struct Recorded {
  int32_t kind, device;
  int64_t start_ns, end_ns;
  std::string name, detail, origin;
};

// The rows of the tpu device in the trace, by ETPU_TRACE_* kind.
const char* row_name(int32_t kind) {
  switch (kind) {
    case ETPU_TRACE_COMPILE: return "compile";
    case ETPU_TRACE_DISK_LOAD: return "disk cache";
    case ETPU_TRACE_EXECUTE: return "execute";
    case ETPU_TRACE_HOST_READ: return "host reads";
    case ETPU_TRACE_TO_DEVICE: return "copies to device";
    default: return "other";
  }
}

// Executions are the device's kernels, copies its memcpys (PyTorch counts
// both as device time); the rest is the runtime's work on the host.
ActivityType activity_type(int32_t kind) {
  switch (kind) {
    case ETPU_TRACE_EXECUTE: return ActivityType::CONCURRENT_KERNEL;
    case ETPU_TRACE_TO_DEVICE: return ActivityType::GPU_MEMCPY;
    default: return ActivityType::PRIVATEUSE1_RUNTIME;
  }
}

constexpr int32_t kKinds = ETPU_TRACE_TO_DEVICE + 1;

class Session : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    if (etpu_trace_start() != ETPU_OK) errors_.push_back(eagertpu_last_error());
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    uint64_t dropped = 0;
    auto each = [](void* user, const etpu_trace_activity* a) {
      static_cast<std::vector<Recorded>*>(user)->push_back(
          {a->kind, a->device, a->start_ns, a->end_ns, a->name, a->detail, a->origin});
    };
    if (etpu_trace_stop(&recorded_, each, &dropped) != ETPU_OK) errors_.push_back(eagertpu_last_error());
    if (dropped > 0) errors_.push_back("eagertpu: " + std::to_string(dropped) + " activities did not fit in the trace");
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    int64_t first = 0, last = 0;
    for (const Recorded& r : recorded_) {
      first = first == 0 ? r.start_ns : std::min(first, r.start_ns);
      last = std::max(last, r.end_ns);
    }
    const libkineto::TraceSpan& span = keep_span(first, last);
    for (const Recorded& r : recorded_) {
      libkineto::GenericTraceActivity a(span, activity_type(r.kind), r.name);
      a.startTime = r.start_ns;
      a.endTime = r.end_ns;
      a.device = device_id(r.device);
      a.resource = r.kind;
      if (!r.origin.empty()) a.addMetadataQuoted("origin", r.origin);
      if (!r.detail.empty()) a.addMetadataQuoted("detail", r.detail);
      logger.handleGenericActivity(a);
    }
    // Handed out once: Kineto may ask a session it keeps again for a later
    // trace that did not record with it (a CPU-only one).
    recorded_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(device_id(0), device_id(0), "tpu", "tpu:0 (eagertpu)");
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> rows;
    for (int32_t k = 0; k < kKinds; ++k) rows.push_back({k, k, device_id(0), row_name(k)});
    return rows;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

 private:
  // The trace's process id for a tpu device: far from real pids.
  static int64_t device_id(int32_t device) { return 0x7470750000 + device; }

  // The span each activity points to, kept for the process: a logger may
  // keep copies of the activities after Kineto drops this session.
  static const libkineto::TraceSpan& keep_span(int64_t first, int64_t last) {
    static std::mutex mutex;
    static std::deque<libkineto::TraceSpan> spans;
    std::lock_guard<std::mutex> lock(mutex);
    return spans.emplace_back(first, last, "eagertpu");
  }

  std::vector<Recorded> recorded_;
  std::vector<std::string> errors_;
};

class TpuActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    bool wanted = false;
    for (ActivityType t : activities_) wanted = wanted || types.count(t) > 0;
    return wanted ? std::make_unique<Session>() : nullptr;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "eagertpu";
  std::set<ActivityType> activities_ = {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                        ActivityType::PRIVATEUSE1_RUNTIME};
};

}  // namespace
}  // namespace etpu

namespace {
using etpu::TpuActivityProfiler;
REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);
}  // namespace
