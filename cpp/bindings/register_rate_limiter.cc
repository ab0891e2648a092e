// resound._core.RateLimiter: configuration plus its own counters, usable on
// its own (tests, what-if checks). A Table copies only the configuration and
// keeps fresh counters of its own.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "conversions.h"
#include "register.h"
#include "resound/rate_limiter.h"

namespace resound::bindings {
namespace {

std::shared_ptr<RateLimiter> Make(const RateLimiterConfig& config) {
  return std::make_shared<RateLimiter>(config);
}

}  // namespace

void RegisterRateLimiter(py::module_& m) {
  py::class_<RateLimiter, std::shared_ptr<RateLimiter>>(m, "RateLimiter", R"doc(
Reverb's rate limiter: samples_per_insert, min_size_to_sample, min_diff,
max_diff. Arguments are validated (ValueError naming the argument).

Example:
    >>> rl = RateLimiter.sample_to_insert_ratio(1.5, 1, (-3.0, 3.1))
    >>> rl.record_insert(); rl.record_insert()
    >>> rl.can_sample(6), rl.can_sample(7)
    (True, False)
)doc")
      .def(py::init([](double samples_per_insert, int64_t min_size_to_sample, double min_diff, double max_diff,
                       std::string kind) {
             return Make({samples_per_insert, min_size_to_sample, min_diff, max_diff, std::move(kind)});
           }),
           py::arg("samples_per_insert"), py::arg("min_size_to_sample"), py::arg("min_diff"),
           py::arg("max_diff"), py::arg("kind") = "",
           "kind names the limiter in messages as the user built it (\"Queue(10)\"); empty: "
           "said from the numbers.")
      .def_static(
          "min_size", [](int64_t min_size_to_sample) { return Make(RateLimiterConfig::MinSize(min_size_to_sample)); },
          py::arg("min_size_to_sample"))
      .def_static(
          "sample_to_insert_ratio",
          [](double samples_per_insert, int64_t min_size_to_sample,
             std::variant<double, std::pair<double, double>> error_buffer) {
            return std::visit(
                [&](const auto& buffer) {
                  return Make(RateLimiterConfig::SampleToInsertRatio(samples_per_insert, min_size_to_sample, buffer));
                },
                error_buffer);
          },
          py::arg("samples_per_insert"), py::arg("min_size_to_sample"), py::arg("error_buffer"),
          "error_buffer is a number (range centred on samples_per_insert * min_size_to_sample) "
          "or a (min_diff, max_diff) pair.")
      .def_static(
          "queue", [](int64_t size) { return Make(RateLimiterConfig::Queue(size)); }, py::arg("size"))
      .def_static(
          "stack", [](int64_t size) { return Make(RateLimiterConfig::Stack(size)); }, py::arg("size"))
      .def_property_readonly("samples_per_insert", [](const RateLimiter& r) { return r.config().samples_per_insert; })
      .def_property_readonly("min_size_to_sample", [](const RateLimiter& r) { return r.config().min_size_to_sample; })
      .def_property_readonly("min_diff", [](const RateLimiter& r) { return r.config().min_diff; })
      .def_property_readonly("max_diff", [](const RateLimiter& r) { return r.config().max_diff; })
      .def_property_readonly("inserts", [](const RateLimiter& r) { return r.counters().inserts; })
      .def_property_readonly("samples", [](const RateLimiter& r) { return r.counters().samples; })
      .def_property_readonly("deletes", [](const RateLimiter& r) { return r.counters().deletes; })
      .def("can_insert", &RateLimiter::CanInsert, py::arg("n") = 1)
      .def("can_sample", &RateLimiter::CanSample, py::arg("n") = 1)
      .def("record_insert", &RateLimiter::RecordInsert)
      .def("record_sample", &RateLimiter::RecordSample)
      .def("record_delete", &RateLimiter::RecordDelete)
      .def("reset_counters", &RateLimiter::ResetCounters)
      .def_property_readonly("kind", [](const RateLimiter& r) { return r.config().Kind(); })
      .def("why_blocked", &RateLimiter::WhyBlocked, py::arg("insert"),
           "Why one more insert (insert=True) or sample is not allowed now.")
      .def("info", [](const RateLimiter& r) { return RateLimiterInfoDict(r.Info()); })
      .def("__repr__", [](const RateLimiter& r) { return r.config().ToString(); });
}

}  // namespace resound::bindings
