// cpu_runtime/cache_hints.h — __ldg and the loads and stores with a cache hint (__ldca, __ldcg,
// __ldcs, __ldlu, __ldcv, __stwb, __stcg, __stcs, __stwt): the hint is about a GPU's caches, so each
// is the plain load or store here.
// Part of cuda_cpu_runtime.h, which includes the parts in order: never included on its own.
#pragma once

template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }
