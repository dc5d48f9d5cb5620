# The soak (tools/test soak, not in the default run): the long repetitions, on the debug kernel,
# for races that hit one time in many. The default run keeps a shorter count of each, one that
# still shows the defect the check targets (said where each is run):
#   switches-10000    fio write+verify passes on the slow controller while the parameters force
#                     the shortest episodes and backoffs, until its queues have switched modes
#                     10,000 times; every block is read back and checked
#                     (reliability/switch-soak-slice: 100);
#   cpu-hotplug-20    each CPU that can go offline (CPU 1) offline and back 20 times while its
#                     queue polls under verify (reliability/cpu-hotplug-while-polling: 6, or on
#                     until an offline ends an episode);
#   bind-unbind-30, insmod-rmmod-10 and their leak checks (lifecycle: 6 binds, 4 loads).
# The checks are the reliability and lifecycle suites' own, with the long counts.
. /guest/suites/reliability.sh
. /guest/suites/lifecycle.sh

# 5,000 episodes, each two switches (mask and poll, then unmask).
switch_soak() {
    slow || return 1
    verify_switches "$SLOW_DISK" "$SLOW_CTRL" 5000 7200
}

check setup setup_reliability
check switches-10000 switch_soak
check cpu-hotplug-20 cpu_hotplug_while_polling 20 20
check bind-unbind-30 bind_cycles 30
check no-leaks-bound no_leaks_bound
check unbind-last nvme-bind "$CTRL_NULL" none
check insmod-rmmod-10 module_cycles 10
check nothing-left nothing_left
check no-leaks-unloaded no_leaks_unloaded
check stock-takes-back stock_takes_it_back
