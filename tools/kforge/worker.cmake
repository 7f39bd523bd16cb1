# `kforge eval` and `kforge serve worker`: link the worker's evaluate library; the
# kforge-evaluator child is built beside kforge.
target_link_libraries(kforge PRIVATE kforge_evaluate_service)
add_dependencies(kforge kforge-evaluator)
