"""`andrea bench --bound`: how fast each kernel could run on a GPU, read from its machine code
without one. gpus.py (the documented rates) -> sass.py (the hot loop's instruction mix) ->
geometry.py (the launches, recorded from the launchers) -> model.py (pipes and the bound) ->
report.py (every kernel of the file). A static bound, not a measurement."""
