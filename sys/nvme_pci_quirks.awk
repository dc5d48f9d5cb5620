# The stock driver's quirk sources beyond its ID table, printed from its pci.c (the Makefile's
# nvme_pci_quirks.h): struct quirk_entry, the quirks= parameter (its list, parser and ops), the
# noacpi parameter, check_vendor_combination_bug (the DMI quirks) and detect_dynamic_quirks.
/^struct quirk_entry \{/ { m = "struct" }
/^static struct quirk_entry \*nvme_pci_quirk_list;/ { m = "param" }
/^static bool noacpi;/ { m = "noacpi" }
/^static unsigned long check_vendor_combination_bug\(/ { m = "fn" }
/^static struct quirk_entry \*detect_dynamic_quirks\(/ { m = "fn" }
m { print }
m == "param" && /^MODULE_PARM_DESC\(quirks/ { d = 1 }
m == "struct" && /^\};$/ || m == "fn" && /^\}$/ || m == "noacpi" && /^MODULE_PARM_DESC/ ||
m == "param" && d && /;$/ { m = ""; d = 0; print "" }
