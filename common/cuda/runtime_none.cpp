// The GPU runtime of a build without CUDA: every question gets the same answer.
#include "common/cuda/runtime.h"

#include "common/error.h"

namespace pa::gpu {

const std::string& unavailable_reason() {
  static const std::string reason =
      "pagedattn was built without CUDA (no nvcc at configure time; use the 'cuda' preset)";
  return reason;
}

namespace {
[[noreturn]] void no_cuda() { throw CudaError(unavailable_reason()); }
}  // namespace

const DeviceInfo& device_info() { no_cuda(); }
void require_process_device(std::string_view) { no_cuda(); }
void require_device_pointers(const DecodeView&, std::string_view) { no_cuda(); }
Buffer::Buffer(std::size_t, std::string_view) { no_cuda(); }
Buffer::Buffer(Buffer&&) noexcept = default;
Buffer& Buffer::operator=(Buffer&&) noexcept = default;
Buffer::~Buffer() = default;
void Buffer::upload(const void*, std::size_t, std::size_t) { no_cuda(); }
void Buffer::download(void*, std::size_t) const { no_cuda(); }
void Buffer::fill(unsigned char) { no_cuda(); }
void Buffer::fill_words(std::uint32_t) { no_cuda(); }
Event::Event() { no_cuda(); }
Event::~Event() = default;
void Event::record(void*) { no_cuda(); }
float Event::elapsed_ms(const Event&, const Event&) { no_cuda(); }
void synchronize(std::string_view) { no_cuda(); }
std::string context_lost() { return ""; }
void require_context(std::string_view) {}
void prepare_table_check() { no_cuda(); }
const std::int32_t* check_tables_async(const DecodeView&, void*, const char*, void*) { no_cuda(); }
void raise_table_fault() { no_cuda(); }
void zero_async(void*, std::size_t, void*) { no_cuda(); }
void flush_l2() { no_cuda(); }
double measure_roof_gbps(std::size_t, int) { no_cuda(); }
double measure_sm_clock_mhz() { no_cuda(); }
double time_bare_read_ms(std::size_t, std::size_t, int, int, int) { no_cuda(); }
void launch_empty_kernel(bool, void*) { no_cuda(); }

}  // namespace pa::gpu
