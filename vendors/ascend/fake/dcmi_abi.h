/*
 * The slice of the Huawei DCMI C ABI (dcmi_interface_api.h, V2 card_id/device_id API) that the fake
 * libdcmi implements: return codes, enums, struct layouts and prototypes.
 *
 * Every layout is pinned with static asserts against design/vendors/ascend.md §2 (sizes and offsets
 * gcc gave for the real header on LP64), so a typo breaks the build instead of silently shifting a
 * field that the backend reads through ctypes. tests/ascend/test_fake_library.py mirrors these asserts
 * with ctypes structures written from §2.
 */
#ifndef HCS_FAKE_DCMI_ABI_H
#define HCS_FAKE_DCMI_ABI_H

#include <stddef.h>

/* ---- return codes (§2.9) ---------------------------------------------------------------------- */
#define DCMI_OK 0
#define DCMI_ERROR_CODE_BASE (-8000)
#define DCMI_ERR_CODE_INVALID_PARAMETER (DCMI_ERROR_CODE_BASE - 1)
#define DCMI_ERR_CODE_OPER_NOT_PERMITTED (DCMI_ERROR_CODE_BASE - 2)
#define DCMI_ERR_CODE_MEM_OPERATE_FAIL (DCMI_ERROR_CODE_BASE - 3)
#define DCMI_ERR_CODE_SECURE_FUN_FAIL (DCMI_ERROR_CODE_BASE - 4)
#define DCMI_ERR_CODE_INNER_ERR (DCMI_ERROR_CODE_BASE - 5)
#define DCMI_ERR_CODE_TIME_OUT (DCMI_ERROR_CODE_BASE - 6)
#define DCMI_ERR_CODE_INVALID_DEVICE_ID (DCMI_ERROR_CODE_BASE - 7)
#define DCMI_ERR_CODE_DEVICE_NOT_EXIST (DCMI_ERROR_CODE_BASE - 8)
#define DCMI_ERR_CODE_IOCTL_FAIL (DCMI_ERROR_CODE_BASE - 9)
#define DCMI_ERR_CODE_SEND_MSG_FAIL (DCMI_ERROR_CODE_BASE - 10)
#define DCMI_ERR_CODE_RECV_MSG_FAIL (DCMI_ERROR_CODE_BASE - 11)
#define DCMI_ERR_CODE_NOT_REDAY (DCMI_ERROR_CODE_BASE - 12) /* sic, as in the real header */
#define DCMI_ERR_CODE_NOT_SUPPORT_IN_CONTAINER (DCMI_ERROR_CODE_BASE - 13)
#define DCMI_ERR_CODE_FILE_OPERATE_FAIL (DCMI_ERROR_CODE_BASE - 14)
#define DCMI_ERR_CODE_RESET_FAIL (DCMI_ERROR_CODE_BASE - 15)
#define DCMI_ERR_CODE_ABORT_OPERATE (DCMI_ERROR_CODE_BASE - 16)
#define DCMI_ERR_CODE_IS_UPGRADING (DCMI_ERROR_CODE_BASE - 17)
#define DCMI_ERR_CODE_RESOURCE_OCCUPIED (DCMI_ERROR_CODE_BASE - 20)
#define DCMI_ERR_CODE_PARTITION_NOT_RIGHT (DCMI_ERROR_CODE_BASE - 22)
#define DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST (DCMI_ERROR_CODE_BASE - 23)
#define DCMI_ERR_CODE_NOT_SUPPORT (DCMI_ERROR_CODE_BASE - 255)

/* ---- enums (every enum is a C int on the wire) -------------------------------------------------- */
enum dcmi_unit_type { NPU_TYPE = 0, MCU_TYPE = 1, CPU_TYPE = 2, INVALID_TYPE = 0xFF };

enum dcmi_boot_status {
    DCMI_BOOT_STATUS_UNINIT = 0,
    DCMI_BOOT_STATUS_BIOS = 1,
    DCMI_BOOT_STATUS_OS = 2,
    DCMI_BOOT_STATUS_FINISH = 3,
    DCMI_SYSTEM_START_FINISH = 16
};

enum dcmi_die_type { NDIE = 0, VDIE = 1, DDIE = 2, INVALID_DIE = 3 };

enum dcmi_rdfx_detect_result {
    DCMI_RDFX_DETECT_OK = 0,
    DCMI_RDFX_DETECT_SOCK_FAIL = 1,
    DCMI_RDFX_DETECT_RECV_TIMEOUT = 2,
    DCMI_RDFX_DETECT_UNREACH = 3,
    DCMI_RDFX_DETECT_TIME_EXCEEDED = 4,
    DCMI_RDFX_DETECT_FAULT = 5,
    DCMI_RDFX_DETECT_INIT = 6,
    DCMI_RDFX_DETECT_THREAD_ERR = 7,
    DCMI_RDFX_DETECT_IP_SET = 8,
    DCMI_RDFX_DETECT_MAX = 0xFF
};

enum dcmi_main_cmd {
    DCMI_MAIN_CMD_DVPP = 0,
    DCMI_MAIN_CMD_CHIP_INF = 12,
    DCMI_MAIN_CMD_HCCS = 16,
    DCMI_MAIN_CMD_TEMP = 50,
    DCMI_MAIN_CMD_SVM = 51,
    DCMI_MAIN_CMD_VDEV_MNG = 52,
    DCMI_MAIN_CMD_SEC = 53,
    DCMI_MAIN_CMD_PCIE = 55,
    DCMI_MAIN_CMD_SIO = 56,
    DCMI_MAIN_CMD_EX_COMPUTING = 0x8000,
    DCMI_MAIN_CMD_DEVICE_SHARE = 0x8001,
    DCMI_MAIN_CMD_EX_CERT = 0x8003
};

#define DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE 0
#define DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE 1
#define DCMI_VMNG_SUB_CMD_GET_FREE_RESOURCE 2
#define DCMI_VMNG_SUB_CMD_SET_SRIOV_SWITCH 3
#define DCMI_VMNG_SUB_CMD_GET_VDEV_ACTIVITY 5
#define DCMI_CHIP_INF_SUB_CMD_CHIP_ID 0
#define DCMI_CHIP_INF_SUB_CMD_SPOD_INFO 1

/* dcmi_get_topo_info_by_device_id (§2.7; the 910B document stops at PIX with BUTT = 6) */
enum {
    DCMI_TOPO_TYPE_SELF = 0,
    DCMI_TOPO_TYPE_SYS = 1,
    DCMI_TOPO_TYPE_PHB = 2,
    DCMI_TOPO_TYPE_HCCS = 3,
    DCMI_TOPO_TYPE_PXB = 4,
    DCMI_TOPO_TYPE_PIX = 5,
    DCMI_TOPO_TYPE_SIO = 6,
    DCMI_TOPO_TYPE_HCCS_SW = 7,
    DCMI_TOPO_TYPE_UB = 8,
    DCMI_TOPO_TYPE_BUTT = 9
};

/* dcmi_get_device_utilization_rate input_type */
#define DCMI_UTILIZATION_RATE_DDR 1
#define DCMI_UTILIZATION_RATE_AICORE 2
#define DCMI_UTILIZATION_RATE_AICPU 3
#define DCMI_UTILIZATION_RATE_CTRLCPU 4
#define DCMI_UTILIZATION_RATE_DDR_BANDWIDTH 5
#define DCMI_UTILIZATION_RATE_HBM 6
#define DCMI_UTILIZATION_RATE_HBM_BANDWIDTH 10
#define DCMI_UTILIZATION_RATE_VECTORCORE 12
#define DCMI_UTILIZATION_RATE_NPU 13

#define MAX_CHIP_NAME_LEN 32
#define DIE_ID_COUNT 5
#define TEMPLATE_NAME_LEN 32
#define DCMI_VDEV_RES_NAME_LEN 16
#define DCMI_VDEV_FOR_RESERVE 32
#define DCMI_SOC_SPLIT_MAX 32
#define DCMI_MAX_EVENT_NAME_LENGTH 256
#define DCMI_MAX_EVENT_DATA_LENGTH 32
#define DCMI_MAX_EVENT_RESV_LENGTH 32
#define DCMI_ERROR_CODE_MAX_COUNT 128
#define DCMI_VDEV_ID_AUTO 0xFFFFFFFFu

/* ---- structs (§2.4-2.8) -------------------------------------------------------------------------- */
struct dcmi_chip_info {
    unsigned char chip_type[MAX_CHIP_NAME_LEN];
    unsigned char chip_name[MAX_CHIP_NAME_LEN];
    unsigned char chip_ver[MAX_CHIP_NAME_LEN];
    unsigned int aicore_cnt;
};

struct dcmi_chip_info_v2 {
    unsigned char chip_type[MAX_CHIP_NAME_LEN];
    unsigned char chip_name[MAX_CHIP_NAME_LEN];
    unsigned char chip_ver[MAX_CHIP_NAME_LEN];
    unsigned int aicore_cnt;
    unsigned char npu_name[MAX_CHIP_NAME_LEN];
};

struct dcmi_pcie_info { /* the old call: note the field order differs from dcmi_pcie_info_all */
    unsigned int deviceid;
    unsigned int venderid;
    unsigned int subvenderid;
    unsigned int subdeviceid;
    unsigned int bdf_deviceid;
    unsigned int bdf_busid;
    unsigned int bdf_funcid;
};

struct dcmi_pcie_info_all {
    unsigned int venderid;
    unsigned int subvenderid;
    unsigned int deviceid;
    unsigned int subdeviceid;
    int domain;
    unsigned int bdf_busid;
    unsigned int bdf_deviceid;
    unsigned int bdf_funcid;
    unsigned char reserve[32];
};

struct dcmi_board_info {
    unsigned int board_id;
    unsigned int pcb_id;
    unsigned int bom_id;
    unsigned int slot_id;
};

struct dcmi_die_id {
    unsigned int soc_die[DIE_ID_COUNT];
};

struct dcmi_hbm_info {
    unsigned long long memory_size; /* MB per MindX (unverified: an older DSMI comment says KB) */
    unsigned int freq;
    unsigned long long memory_usage;
    int temp;
    unsigned int bandwith_util_rate;
};

struct dcmi_memory_info { /* dcmi_get_device_memory_info_v2 */
    unsigned long long memory_size;
    unsigned int freq;
    unsigned int utiliza;
};

struct dcmi_memory_info_stru { /* V1 dcmi_get_memory_info */
    unsigned long long memory_size;
    unsigned int freq;
    unsigned int utiliza;
};

struct dcmi_get_memory_info_stru {
    unsigned long long memory_size; /* MB */
    unsigned long long memory_available;
    unsigned int freq;
    unsigned long hugepagesize; /* KB; unsigned long is 8 bytes on LP64, hence 112 and not 96 */
    unsigned long hugepages_total;
    unsigned long hugepages_free;
    unsigned int utiliza;
    unsigned char reserve[60];
};

struct dcmi_spod_info {
    unsigned int sdid;
    unsigned int super_pod_size;
    unsigned int super_pod_id;
    unsigned int server_index;
    unsigned int chassis_id;
    unsigned int super_pod_type;
    unsigned int reserve[6];
};

struct dcmi_base_resource {
    unsigned long long token;
    unsigned long long token_max;
    unsigned long long task_timeout;
    unsigned int vfg_id;
    unsigned char vip_mode;
    unsigned char reserved[DCMI_VDEV_FOR_RESERVE - 1];
};

struct dcmi_computing_resource {
    float aic;
    float aiv;
    unsigned short dsa;
    unsigned short rtsq;
    unsigned short acsq;
    unsigned short cdqm;
    unsigned short c_core;
    unsigned short ffts;
    unsigned short sdma;
    unsigned short pcie_dma;
    unsigned long long memory_size; /* MB */
    unsigned int event_id;
    unsigned int notify_id;
    unsigned int stream_id;
    unsigned int model_id;
    unsigned short topic_schedule_aicpu;
    unsigned short host_ctrl_cpu;
    unsigned short host_aicpu;
    unsigned short device_aicpu;
    unsigned short topic_ctrl_cpu_slot;
    unsigned int vdev_aicore_utilization;
    unsigned long long vdev_memory_total;
    unsigned long long vdev_memory_free;
    unsigned char reserved[12];
};

struct dcmi_media_resource {
    float jpegd;
    float jpege;
    float vpc;
    float vdec;
    float pngd;
    float venc;
    unsigned char reserved[DCMI_VDEV_FOR_RESERVE];
};

struct dcmi_create_vdev_out {
    unsigned int vdev_id;
    unsigned int pcie_bus;
    unsigned int pcie_device;
    unsigned int pcie_func;
    unsigned int vfg_id;
    unsigned char reserved[DCMI_VDEV_FOR_RESERVE];
};

struct dcmi_create_vdev_res_stru {
    unsigned int vdev_id;
    unsigned int vfg_id;
    char template_name[TEMPLATE_NAME_LEN];
    unsigned char reserved[64];
};

struct dcmi_vdev_query_info {
    char name[DCMI_VDEV_RES_NAME_LEN];
    unsigned int status;
    unsigned int is_container_used;
    unsigned int vfid;
    unsigned int vfg_id;
    unsigned long long container_id;
    struct dcmi_base_resource base;
    struct dcmi_computing_resource computing;
    struct dcmi_media_resource media;
};

struct dcmi_vdev_query_stru {
    unsigned int vdev_id;
    struct dcmi_vdev_query_info query_info;
};

struct dcmi_soc_free_resource {
    unsigned int vfg_num;
    unsigned int vfg_bitmap;
    struct dcmi_base_resource base;
    struct dcmi_computing_resource computing;
    struct dcmi_media_resource media;
};

struct dcmi_soc_total_resource {
    unsigned int vdev_num;
    unsigned int vdev_id[DCMI_SOC_SPLIT_MAX];
    unsigned int vfg_num;
    unsigned int vfg_bitmap;
    struct dcmi_base_resource base;
    struct dcmi_computing_resource computing;
    struct dcmi_media_resource media;
};

/* Fault events (§2.8): declared so their layouts are pinned; the fake exports no subscription call. */
struct dcmi_event_filter { /* passed BY VALUE to dcmi_subscribe_fault_event */
    unsigned long long filter_flag;
    unsigned int event_id;
    unsigned char severity;
    unsigned char node_type;
    unsigned char resv[DCMI_MAX_EVENT_RESV_LENGTH];
};

struct dcmi_dms_fault_event {
    unsigned int event_id;
    unsigned short deviceid; /* logic id */
    unsigned char node_type;
    unsigned char node_id;
    unsigned char sub_node_type;
    unsigned char sub_node_id;
    unsigned char severity;
    unsigned char assertion;
    int event_serial_num;
    int notify_serial_num;
    unsigned long long alarm_raised_time;
    char event_name[DCMI_MAX_EVENT_NAME_LENGTH];
    char additional_info[DCMI_MAX_EVENT_DATA_LENGTH];
    unsigned char os_id;
    unsigned char resv_1[1];
    unsigned short node_type_ex;
    unsigned short sub_node_type_ex;
    unsigned char resv_2[2];
    unsigned char resv[DCMI_MAX_EVENT_RESV_LENGTH - 8];
};

enum dcmi_event_type { DCMI_DMS_FAULT_EVENT = 0, DCMI_EVENT_TYPE_MAX };

struct dcmi_event {
    enum dcmi_event_type type;
    union {
        struct dcmi_dms_fault_event dms_event;
    } event_t;
};

/* ---- layout pins (ascend.md §2, gcc x86_64 LP64) ------------------------------------------------ */
#define PIN_SIZE(type, n) _Static_assert(sizeof(struct type) == (n), #type " must be " #n " bytes")
#define PIN_AT(type, field, n) _Static_assert(offsetof(struct type, field) == (n), #type "." #field " at " #n)

PIN_SIZE(dcmi_chip_info, 100);
PIN_AT(dcmi_chip_info, chip_name, 32);
PIN_AT(dcmi_chip_info, chip_ver, 64);
PIN_AT(dcmi_chip_info, aicore_cnt, 96);
PIN_SIZE(dcmi_chip_info_v2, 132);
PIN_AT(dcmi_chip_info_v2, npu_name, 100);
PIN_SIZE(dcmi_pcie_info, 28);
PIN_SIZE(dcmi_pcie_info_all, 64);
PIN_AT(dcmi_pcie_info_all, deviceid, 8);
PIN_AT(dcmi_pcie_info_all, domain, 16);
PIN_AT(dcmi_pcie_info_all, bdf_busid, 20);
PIN_AT(dcmi_pcie_info_all, bdf_deviceid, 24);
PIN_AT(dcmi_pcie_info_all, bdf_funcid, 28);
PIN_AT(dcmi_pcie_info_all, reserve, 32);
PIN_SIZE(dcmi_board_info, 16);
PIN_SIZE(dcmi_die_id, 20);
PIN_SIZE(dcmi_hbm_info, 32);
PIN_AT(dcmi_hbm_info, freq, 8);
PIN_AT(dcmi_hbm_info, memory_usage, 16);
PIN_AT(dcmi_hbm_info, temp, 24);
PIN_AT(dcmi_hbm_info, bandwith_util_rate, 28);
PIN_SIZE(dcmi_memory_info, 16);
PIN_SIZE(dcmi_memory_info_stru, 16);
PIN_SIZE(dcmi_get_memory_info_stru, 112);
PIN_AT(dcmi_get_memory_info_stru, memory_available, 8);
PIN_AT(dcmi_get_memory_info_stru, freq, 16);
PIN_AT(dcmi_get_memory_info_stru, hugepagesize, 24);
PIN_AT(dcmi_get_memory_info_stru, hugepages_total, 32);
PIN_AT(dcmi_get_memory_info_stru, hugepages_free, 40);
PIN_AT(dcmi_get_memory_info_stru, utiliza, 48);
PIN_AT(dcmi_get_memory_info_stru, reserve, 52);
PIN_SIZE(dcmi_spod_info, 48);
PIN_SIZE(dcmi_base_resource, 64);
PIN_AT(dcmi_base_resource, vfg_id, 24);
PIN_AT(dcmi_base_resource, vip_mode, 28);
PIN_SIZE(dcmi_computing_resource, 96);
PIN_AT(dcmi_computing_resource, memory_size, 24);
PIN_AT(dcmi_computing_resource, event_id, 32);
PIN_AT(dcmi_computing_resource, model_id, 44);
PIN_AT(dcmi_computing_resource, topic_schedule_aicpu, 48);
PIN_AT(dcmi_computing_resource, device_aicpu, 54);
PIN_AT(dcmi_computing_resource, topic_ctrl_cpu_slot, 56);
PIN_AT(dcmi_computing_resource, vdev_aicore_utilization, 60);
PIN_AT(dcmi_computing_resource, vdev_memory_total, 64);
PIN_AT(dcmi_computing_resource, vdev_memory_free, 72);
PIN_AT(dcmi_computing_resource, reserved, 80);
PIN_SIZE(dcmi_media_resource, 56);
PIN_SIZE(dcmi_create_vdev_res_stru, 104);
PIN_AT(dcmi_create_vdev_res_stru, template_name, 8);
PIN_AT(dcmi_create_vdev_res_stru, reserved, 40);
PIN_SIZE(dcmi_create_vdev_out, 52);
PIN_SIZE(dcmi_vdev_query_info, 256);
PIN_AT(dcmi_vdev_query_info, status, 16);
PIN_AT(dcmi_vdev_query_info, container_id, 32);
PIN_AT(dcmi_vdev_query_info, base, 40);
PIN_AT(dcmi_vdev_query_info, computing, 104);
PIN_AT(dcmi_vdev_query_info, media, 200);
PIN_SIZE(dcmi_vdev_query_stru, 264);
PIN_AT(dcmi_vdev_query_stru, query_info, 8);
PIN_SIZE(dcmi_soc_total_resource, 360);
PIN_AT(dcmi_soc_total_resource, vdev_id, 4);
PIN_AT(dcmi_soc_total_resource, vfg_num, 132);
PIN_AT(dcmi_soc_total_resource, vfg_bitmap, 136);
PIN_AT(dcmi_soc_total_resource, base, 144);
PIN_AT(dcmi_soc_total_resource, computing, 208);
PIN_AT(dcmi_soc_total_resource, media, 304);
PIN_SIZE(dcmi_soc_free_resource, 224);
PIN_AT(dcmi_soc_free_resource, base, 8);
PIN_AT(dcmi_soc_free_resource, computing, 72);
PIN_AT(dcmi_soc_free_resource, media, 168);
PIN_SIZE(dcmi_event_filter, 48);
PIN_AT(dcmi_event_filter, event_id, 8);
PIN_AT(dcmi_event_filter, severity, 12);
PIN_AT(dcmi_event_filter, node_type, 13);
PIN_AT(dcmi_event_filter, resv, 14);
PIN_SIZE(dcmi_dms_fault_event, 352);
PIN_AT(dcmi_dms_fault_event, deviceid, 4);
PIN_AT(dcmi_dms_fault_event, event_serial_num, 12);
PIN_AT(dcmi_dms_fault_event, alarm_raised_time, 24);
PIN_AT(dcmi_dms_fault_event, event_name, 32);
PIN_AT(dcmi_dms_fault_event, additional_info, 288);
PIN_AT(dcmi_dms_fault_event, os_id, 320);
PIN_SIZE(dcmi_event, 360);
PIN_AT(dcmi_event, event_t, 8);

/* ---- prototypes (§2.1-2.7, as in the real header) -------------------------------------------------- */
int dcmi_init(void);
int dcmi_get_dcmi_version(char *dcmi_ver, unsigned int len);
int dcmi_get_driver_version(char *driver_ver, unsigned int len);
int dcmi_get_card_list(int *card_num, int *card_list, int list_len);
int dcmi_get_card_num_list(int *card_num, int *card_list, int list_len);
int dcmi_get_device_num_in_card(int card_id, int *device_num);
int dcmi_get_device_id_in_card(int card_id, int *device_id_max, int *mcu_id, int *cpu_id);
int dcmi_get_device_type(int card_id, int device_id, enum dcmi_unit_type *device_type);
int dcmi_get_product_type(int card_id, int device_id, char *product_type_str, int buf_size);
int dcmi_get_device_board_info(int card_id, int device_id, struct dcmi_board_info *board_info);
int dcmi_get_device_boot_status(int card_id, int device_id, enum dcmi_boot_status *boot_status);
int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id);
int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int *phyid);
int dcmi_get_device_logicid_from_phyid(unsigned int phyid, unsigned int *logicid);
int dcmi_get_card_id_device_id_from_logicid(int *card_id, int *device_id, unsigned int device_logic_id);
int dcmi_get_card_id_device_id_from_phyid(int *card_id, int *device_id, unsigned int device_phy_id);
int dcmi_get_device_health(int card_id, int device_id, unsigned int *health);
int dcmi_get_driver_health(unsigned int *health);
int dcmi_get_device_errorcode_v2(int card_id, int device_id, int *error_count, unsigned int *error_code_list,
                                 unsigned int list_len);
int dcmi_get_device_errorcode_string(int card_id, int device_id, unsigned int error_code,
                                     unsigned char *error_info, int buf_size);
int dcmi_get_device_network_health(int card_id, int device_id, enum dcmi_rdfx_detect_result *result);
int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info *chip_info);
int dcmi_get_device_chip_info_v2(int card_id, int device_id, struct dcmi_chip_info_v2 *chip_info);
int dcmi_get_device_memory_info_v3(int card_id, int device_id, struct dcmi_get_memory_info_stru *memory_info);
int dcmi_get_device_memory_info_v2(int card_id, int device_id, struct dcmi_memory_info *memory_info);
int dcmi_get_memory_info(int card_id, int device_id, struct dcmi_memory_info_stru *device_memory_info);
int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *hbm_info);
int dcmi_get_device_pcie_info(int card_id, int device_id, struct dcmi_pcie_info *pcie_info);
int dcmi_get_device_pcie_info_v2(int card_id, int device_id, struct dcmi_pcie_info_all *pcie_info);
int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type input_type, struct dcmi_die_id *die_id);
int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type, unsigned int *utilization_rate);
int dcmi_get_device_temperature(int card_id, int device_id, int *temperature);
int dcmi_get_device_power_info(int card_id, int device_id, int *power);
int dcmi_get_affinity_cpu_info_by_device_id(int card_id, int device_id, char *affinity_cpu, int *length);
int dcmi_get_device_info(int card_id, int device_id, enum dcmi_main_cmd main_cmd, unsigned int sub_cmd, void *buf,
                         unsigned int *size);
int dcmi_create_vdevice(int card_id, int device_id, struct dcmi_create_vdev_res_stru *vdev,
                        struct dcmi_create_vdev_out *out);
int dcmi_set_destroy_vdevice(int card_id, int device_id, unsigned int vdevid);
int dcmi_get_vdevice_mode(int *mode);
int dcmi_get_vnpu_config_recover_mode(unsigned int *mode);
int dcmi_get_topo_info_by_device_id(int card_id1, int device_id1, int card_id2, int device_id2, int *topo_type);

#endif /* HCS_FAKE_DCMI_ABI_H */
