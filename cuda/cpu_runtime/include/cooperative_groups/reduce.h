// cooperative_groups/reduce.h for the CPU build (andrea): cg::reduce and its operators.
#pragma once
#include "../../cooperative_groups.h"
