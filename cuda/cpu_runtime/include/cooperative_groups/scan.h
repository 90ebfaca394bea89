// cooperative_groups/scan.h for the CPU build (andrea): cg::inclusive_scan, cg::exclusive_scan.
#pragma once
#include "../../cooperative_groups.h"
