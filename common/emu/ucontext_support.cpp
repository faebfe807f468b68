// Sanitizer builds only (PAGEDATTN_SANITIZE): the emulator's fibers use Boost.Context's
// ucontext back end there, which tells AddressSanitizer about every stack switch. Debian ships
// libboost_context built for the assembly (fcontext) back end only, so the one function the
// ucontext header leaves to the library is defined here.
#include <boost/context/fiber.hpp>

/// \cond BOOST_INTERNALS  (a definition Boost declares; nothing for the documentation)
namespace boost::context::detail {

// The record of the context running on this thread. It starts as the thread's own context
// (a default-constructed record is a "main" context) and each switch replaces it.
fiber_activation_record*& fiber_activation_record::current() noexcept {
  thread_local fiber_activation_record thread_context;
  thread_local fiber_activation_record* running = &thread_context;
  return running;
}

}  // namespace boost::context::detail
/// \endcond
