"""The timing harness of `andrea bench`: the sweep, one file per side (cpu, gpu), the torch peer, the roofline."""
