// device_launch_parameters.h for the CPU build (andrea): threadIdx & co. come with the runtime header.
#pragma once

