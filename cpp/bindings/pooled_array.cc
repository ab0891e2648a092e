#include "pooled_array.h"

#include <pybind11/stl.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "register.h"
#include "resound/block_pool.h"

namespace resound::bindings {

py::array PooledArray(const py::dtype& dtype, const std::vector<py::ssize_t>& shape) {
  // Uninitialised memory is no place for Python object pointers.
  if (dtype.attr("hasobject").cast<bool>()) throw py::value_error("dtype: object dtypes are not supported");
  size_t bytes = static_cast<size_t>(dtype.itemsize());
  for (const py::ssize_t extent : shape) {
    if (extent < 0) throw py::value_error("shape: extents must be >= 0, got " + std::to_string(extent));
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(extent), &bytes)) {
      throw py::value_error("shape: the array would not fit in memory");
    }
  }
  auto buffer = BlockPool::Shared().Acquire(bytes);
  std::byte* const data = buffer.get();
  // The capsule owns a copy of the handle; numpy holds the capsule as the
  // array's base, so views keep the buffer too.
  auto owner = std::make_unique<std::shared_ptr<std::byte>>(std::move(buffer));
  py::capsule base(owner.get(), [](void* handle) noexcept {
    std::unique_ptr<std::shared_ptr<std::byte>> adopted(static_cast<std::shared_ptr<std::byte>*>(handle));
  });
  owner.release();  // the capsule's destructor frees it from here on
  return py::array(dtype, shape, data, base);
}

void RegisterMemory(py::module_& m) {
  m.def(
      "pooled_empty",
      [](const std::vector<py::ssize_t>& shape, const py::object& dtype) {
        return PooledArray(py::dtype::from_args(dtype), shape);
      },
      py::arg("shape"), py::arg("dtype"),
      R"doc(An uninitialised array (like numpy.empty) whose buffer comes from, and
returns to, resound's pool of large buffers: reused buffers skip the page
faults of fresh memory. For outputs of 256 KB and more; smaller ones are
plain allocations. Every buffer starts on a 64-byte boundary (XLA's CPU
client aliases such memory instead of copying it).)doc");
  m.def(
      "pool_info",
      [] {
        const BlockPool& pool = BlockPool::Shared();
        py::dict info;
        info["cached_bytes"] = pool.cached_bytes();
        info["num_cached"] = pool.num_cached();
        info["max_cached_bytes"] = pool.max_cached_bytes();
        return info;
      },
      "The shared buffer pool's state: cached_bytes, num_cached, max_cached_bytes.");
  m.def(
      "keep_large_allocations_warm",
      [](int mmap_threshold, int trim_threshold) {
#if defined(__GLIBC__)
        return mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 && mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1;
#else
        static_cast<void>(mmap_threshold);
        static_cast<void>(trim_threshold);
        return false;
#endif
      },
      py::arg("mmap_threshold"), py::arg("trim_threshold"),
      R"doc(Sets glibc malloc's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD for the whole
process; True if glibc took both (False elsewhere than glibc). Blocks below
mmap_threshold come from the heap instead of fresh mappings, and the heap
keeps up to trim_threshold free bytes instead of returning them: messages of
megabytes allocated and freed per call then reuse warm pages. Older glibc refuses an
mmap_threshold above 32 MB.)doc");
}

}  // namespace resound::bindings
