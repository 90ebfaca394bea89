// cooperative_groups.h for the CPU build (andrea): see ../cpu_runtime/cooperative_groups.h.
#pragma once
#include "../cooperative_groups.h"
