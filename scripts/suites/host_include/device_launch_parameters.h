// The host half of a suite program gets the CUDA API from andrea_host.h (force-included).
#pragma once
