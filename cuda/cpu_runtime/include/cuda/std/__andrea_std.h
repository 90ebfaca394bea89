// cuda::std is ::std on the CPU build (andrea).
#pragma once
namespace cuda { namespace std = ::std; }
