/* vk_heaps.c - what Vulkan tells a program of its GPU's memory: each heap's size and
 * flags, and VK_EXT_memory_budget's budget and usage where the driver has it; then,
 * with --alloc-mib N, allocates device-local memory N MiB at a time until the
 * driver refuses, and prints how much it got. One line per fact, "key=value", for
 * the GPU suite (tests/gpu/vulkan.sh). Built by scripts/gpu-carry where Vulkan's
 * headers are installed; it needs only libvulkan.so.1 at run time.
 * Usage: vk_heaps [--alloc-mib N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan.h>

static VkInstance make_instance(void)
{
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "vk_heaps", .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
    VkInstance inst = VK_NULL_HANDLE;
    VkResult r = vkCreateInstance(&ci, NULL, &inst);
    if (r != VK_SUCCESS) {
        printf("instance_error=%d\n", (int)r);
        exit(1);
    }
    return inst;
}

static int has_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
    VkExtensionProperties *e = calloc(n, sizeof *e);
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e);
    int found = 0;
    for (uint32_t i = 0; i < n && !found; i++)
        found = !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

static void print_heaps(VkPhysicalDevice pd)
{
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    int has_budget = has_extension(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    VkPhysicalDeviceMemoryProperties2 p = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
        .pNext = has_budget ? &budget : NULL};
    vkGetPhysicalDeviceMemoryProperties2(pd, &p);
    printf("memory_budget_ext=%d\n", has_budget);
    for (uint32_t h = 0; h < p.memoryProperties.memoryHeapCount; h++) {
        const VkMemoryHeap *heap = &p.memoryProperties.memoryHeaps[h];
        printf("heap=%u device_local=%d size_mib=%llu", h,
               (heap->flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0,
               (unsigned long long)(heap->size >> 20));
        if (has_budget)
            printf(" budget_mib=%llu usage_mib=%llu",
                   (unsigned long long)(budget.heapBudget[h] >> 20),
                   (unsigned long long)(budget.heapUsage[h] >> 20));
        printf("\n");
    }
}

/* The first memory type of a device-local heap. */
static uint32_t device_local_type(VkPhysicalDevice pd)
{
    VkPhysicalDeviceMemoryProperties p;
    vkGetPhysicalDeviceMemoryProperties(pd, &p);
    for (uint32_t t = 0; t < p.memoryTypeCount; t++)
        if (p.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
            return t;
    return 0;
}

static void fill(VkPhysicalDevice pd, unsigned mib)
{
    float prio = 1.0f;
    VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &q};
    VkDevice dev;
    VkResult r = vkCreateDevice(pd, &dci, NULL, &dev);
    if (r != VK_SUCCESS) {
        printf("device_error=%d\n", (int)r);
        return;
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = (VkDeviceSize)mib << 20,
                               .memoryTypeIndex = device_local_type(pd)};
    VkDeviceMemory mem[4096];
    unsigned n = 0;
    while (n < 4096 && (r = vkAllocateMemory(dev, &ai, NULL, &mem[n])) == VK_SUCCESS)
        n++;
    printf("allocated_mib=%u refusal=%d\n", n * mib, (int)r);
    print_heaps(pd); /* the budget's usage now counts what this process holds */
    while (n)
        vkFreeMemory(dev, mem[--n], NULL);
    vkDestroyDevice(dev, NULL);
}

int main(int argc, char **argv)
{
    unsigned alloc_mib = argc == 3 && !strcmp(argv[1], "--alloc-mib") ? (unsigned)atoi(argv[2])
                                                                      : 0;
    VkInstance inst = make_instance();
    uint32_t n = 1;
    VkPhysicalDevice pd;
    if (vkEnumeratePhysicalDevices(inst, &n, &pd) < 0 || n == 0) {
        printf("no_device=1\n");
        return 1;
    }
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    printf("device=%s\n", props.deviceName);
    print_heaps(pd);
    if (alloc_mib)
        fill(pd, alloc_mib);
    vkDestroyInstance(inst, NULL);
    return 0;
}
