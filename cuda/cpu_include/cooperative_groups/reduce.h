// cooperative_groups/reduce.h for the CPU build (andrea): cg::reduce and its operators.
#pragma once
#include "../../cpu_runtime/cooperative_groups.h"
