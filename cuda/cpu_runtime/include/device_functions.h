// device_functions.h for the CPU build (andrea): the intrinsics come with the runtime header.
#pragma once

