"""World models of programs: v4 (:mod:`~.open_space`) reads any program of the ML suite's
open space from its text and learns each task from its anchors."""
