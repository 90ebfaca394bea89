// vector_types.h for the CPU build (andrea): float4 & co. come with the runtime header.
#pragma once

