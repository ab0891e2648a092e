// resound._core.ItemSelector (+ PrioritizedSelector), make_selector,
// SelectorOptions and SumTree. Selectors are exposed for direct use and
// testing; a Table never shares them: it builds its own from their options.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "conversions.h"
#include "register.h"
#include "resound/selectors/item_selector.h"
#include "resound/selectors/prioritized_item_selector.h"
#include "resound/selectors/selector_options.h"
#include "resound/selectors/sum_tree.h"

namespace resound::bindings {

void RegisterSelectors(py::module_& m) {
  py::class_<SelectorOptions>(m, "SelectorOptions", "How a selector is set up; see make_selector.")
      .def(py::init([](const std::string& kind, double priority_exponent, std::optional<uint64_t> seed) {
             SelectorOptions options{ParseSelectorKind(kind), priority_exponent, seed};
             MakeSelector(options);  // validates the exponent
             return options;
           }),
           py::arg("kind"), py::arg("priority_exponent") = 0.0, py::arg("seed") = py::none())
      .def_property_readonly("kind", &SelectorOptions::kind_name)
      .def_readonly("priority_exponent", &SelectorOptions::priority_exponent)
      .def_readonly("seed", &SelectorOptions::seed)
      .def_property_readonly("is_deterministic", &SelectorOptions::is_deterministic)
      .def("__eq__",
           [](const SelectorOptions& a, const SelectorOptions& b) {
             return a.kind == b.kind && a.priority_exponent == b.priority_exponent && a.seed == b.seed;
           })
      .def("__repr__", &SelectorOptions::ToString);

  py::class_<ItemSelector, std::shared_ptr<ItemSelector>>(m, "ItemSelector", R"doc(
Chooses items by key. Not thread-safe on its own (tables lock around it).

Example:
    >>> s = make_selector("fifo")
    >>> s.insert(1, 1.0); s.insert(2, 5.0)
    >>> s.sample()
    (1, 1.0)
)doc")
      .def(
          "insert",
          [](ItemSelector& s, py::handle key, double priority) { s.Insert(ToKey(key, "key"), priority); },
          py::arg("key"), py::arg("priority"))
      .def(
          "update",
          [](ItemSelector& s, py::handle key, double priority) { s.Update(ToKey(key, "key"), priority); },
          py::arg("key"), py::arg("priority"))
      .def(
          "delete", [](ItemSelector& s, py::handle key) { s.Delete(ToKey(key, "key")); }, py::arg("key"))
      .def(
          "sample",
          [](ItemSelector& s) {
            const Selection selection = s.Sample();
            return py::make_tuple(selection.key, selection.probability);
          },
          "Returns (key, probability).")
      .def("validate_priority", &ItemSelector::ValidatePriority, py::arg("priority"))
      .def("clear", &ItemSelector::Clear)
      .def("__len__", &ItemSelector::size)
      .def("__contains__", [](const ItemSelector& s, py::handle key) { return s.Contains(ToKey(key, "key")); })
      .def_property_readonly("options", &ItemSelector::options)
      .def("__repr__", [](const ItemSelector& s) { return s.options().ToString(); });

  py::class_<PrioritizedItemSelector, ItemSelector, std::shared_ptr<PrioritizedItemSelector>>(m,
                                                                                      "PrioritizedSelector")
      .def(py::init<double, std::optional<uint64_t>>(), py::arg("priority_exponent"),
           py::arg("seed") = py::none())
      .def(
          "probability",
          [](const PrioritizedItemSelector& s, py::handle key) { return s.Probability(ToKey(key, "key")); },
          py::arg("key"), "The probability that sample() returns `key` now.");

  m.def(
      "make_selector",
      [](const std::string& kind, double priority_exponent, std::optional<uint64_t> seed) {
        return std::shared_ptr<ItemSelector>(MakeSelector({ParseSelectorKind(kind), priority_exponent, seed}));
      },
      py::arg("kind"), py::arg("priority_exponent") = 0.0, py::arg("seed") = py::none(),
      R"doc(Builds a selector: kind is one of 'uniform', 'prioritized', 'fifo', 'lifo',
'min_heap', 'max_heap'. priority_exponent applies to 'prioritized'; seed to
the random ones (uniform, prioritized).)doc");

  py::class_<SumTree>(m, "SumTree", "Array sum tree behind PrioritizedSelector.")
      .def(py::init<>())
      .def("resize", &SumTree::Resize, py::arg("size"))
      .def("set", &SumTree::Set, py::arg("index"), py::arg("weight"))
      .def("get", &SumTree::Get, py::arg("index"))
      .def("find", &SumTree::Find, py::arg("target"))
      .def("clear", &SumTree::Clear)
      .def_property_readonly("total", &SumTree::Total)
      .def_property_readonly("capacity", &SumTree::capacity)
      .def("__len__", &SumTree::size);
}

}  // namespace resound::bindings
