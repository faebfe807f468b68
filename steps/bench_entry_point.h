#pragma once
/// \file
/// What one call of the entry point (api/decode.h) costs the host on the GPU: rows of
/// `bench_ladder` beside the kernel timings of harness/bench.h. They live in steps/ because the
/// harness sits below api/ and may not call it (scripts/check_layers).

namespace pa::bench {

/// Registers `entry_point/gpu/small-batch/host/<mode>` when a GPU is present: the host time from
/// a call to its return, in µs a call, of the rung pa::plan_decode chooses for small-batch's
/// problem. `<mode>` is what is called:
///  - `empty-kernels`: no rung, the floor under the others: two launches of a kernel that does
///    nothing, the second overlapped (programmatic dependent launch), as the rung launches its
///    split kernel and its merge on small-batch (gpu::launch_empty_kernel);
///  - `launch`: the rung's own launch (plan.kernel().launch), checked mode off;
///  - `decode`: pa::decode, checked mode off (DecodeView::checked): the launch, the entry
///    point's checks of the view and gpu::require_process_device;
///  - `decode-checked`: pa::decode, checked mode on (the default): that, gpu::require_device_pointers
///    (one driver query a pointer) and the launch of the device-side check of the tables.
///
/// Each row: 41 rounds of 64 calls, the GPU drained between rounds outside the timed region; the
/// median round's mean a call (counter `host_us`), the rung in the label. The output of the last
/// call is checked against the oracle after timing (but for `empty-kernels`, which writes none).
void register_entry_point();

}  // namespace pa::bench
