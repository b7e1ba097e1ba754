/* gl_memory.c - what OpenGL tells a program of its GPU's memory, headless through EGL's
 * device platform: the renderer, GL_NVX_gpu_memory_info's dedicated video memory, total
 * available and currently available memory; then, with --alloc-mib N, buffers of N MiB
 * allocated and cleared (so that the driver places them) until GL_OUT_OF_MEMORY or
 * --max-mib, with what is available after each GiB and at the end. One line per fact,
 * "key=value", written as it is known (a run the suite's timeout ends keeps what it
 * printed), for the GPU suite (tests/gpu/opengl.sh). Built by scripts/gpu-carry where
 * EGL's and GL's headers are installed; it needs only glvnd's libEGL.so.1 and
 * libOpenGL.so.0 and NVIDIA's EGL vendor library at run time.
 * Usage: gl_memory [--alloc-mib N] [--max-mib M] */
#define GL_GLEXT_PROTOTYPES 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/gl.h>
#include <GL/glext.h>

#ifndef GL_GPU_MEMORY_INFO_DEDICATED_VIDMEM_NVX /* GL_NVX_gpu_memory_info, in KiB */
#define GL_GPU_MEMORY_INFO_DEDICATED_VIDMEM_NVX 0x9047
#define GL_GPU_MEMORY_INFO_TOTAL_AVAILABLE_MEMORY_NVX 0x9048
#define GL_GPU_MEMORY_INFO_CURRENT_AVAILABLE_VIDMEM_NVX 0x9049
#endif

static void fail(const char *what)
{
    printf("error=%s egl_error=0x%x\n", what, (unsigned)eglGetError());
    exit(1);
}

/* The first EGL device's display (EGL_EXT_platform_device), or the default one. */
static EGLDisplay open_display(void)
{
    PFNEGLQUERYDEVICESEXTPROC query =
        (PFNEGLQUERYDEVICESEXTPROC)eglGetProcAddress("eglQueryDevicesEXT");
    PFNEGLGETPLATFORMDISPLAYEXTPROC platform =
        (PFNEGLGETPLATFORMDISPLAYEXTPROC)eglGetProcAddress("eglGetPlatformDisplayEXT");
    EGLDeviceEXT devices[8];
    EGLint n = 0;
    if (query && platform && query(8, devices, &n) && n > 0) {
        printf("egl_devices=%d\n", (int)n);
        return platform(EGL_PLATFORM_DEVICE_EXT, devices[0], NULL);
    }
    printf("egl_devices=none\n");
    return eglGetDisplay(EGL_DEFAULT_DISPLAY);
}

static void make_current(void)
{
    EGLDisplay dpy = open_display();
    EGLint major = 0, minor = 0;
    if (dpy == EGL_NO_DISPLAY || !eglInitialize(dpy, &major, &minor))
        fail("egl_initialize");
    printf("egl_version=%d.%d egl_vendor=%s\n", (int)major, (int)minor,
           eglQueryString(dpy, EGL_VENDOR));
    const EGLint want[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE,
                           EGL_OPENGL_BIT, EGL_NONE};
    EGLConfig cfg;
    EGLint found = 0;
    if (!eglBindAPI(EGL_OPENGL_API) || !eglChooseConfig(dpy, want, &cfg, 1, &found) || !found)
        fail("egl_config");
    EGLContext ctx = eglCreateContext(dpy, cfg, EGL_NO_CONTEXT, NULL);
    if (ctx == EGL_NO_CONTEXT || !eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx))
        fail("egl_context");
}

/* One of GL_NVX_gpu_memory_info's figures in MiB; -1 where the driver has none. */
static GLint memory_info(GLenum what)
{
    GLint kib = -1;
    glGetIntegerv(what, &kib);
    return glGetError() == GL_NO_ERROR && kib >= 0 ? kib / 1024 : -1;
}

static void print_memory(const char *when)
{
    printf("%s: dedicated_mib=%d total_available_mib=%d current_available_mib=%d\n", when,
           memory_info(GL_GPU_MEMORY_INFO_DEDICATED_VIDMEM_NVX),
           memory_info(GL_GPU_MEMORY_INFO_TOTAL_AVAILABLE_MEMORY_NVX),
           memory_info(GL_GPU_MEMORY_INFO_CURRENT_AVAILABLE_VIDMEM_NVX));
}

/* Buffers of step MiB, each cleared and finished, until the driver refuses or max_mib. */
static void allocate(long step, long max_mib)
{
    long got = 0;
    GLenum err = GL_NO_ERROR;
    while (got + step <= max_mib) {
        GLuint buf;
        glGenBuffers(1, &buf);
        glBindBuffer(GL_ARRAY_BUFFER, buf);
        glBufferData(GL_ARRAY_BUFFER, (GLsizeiptr)step << 20, NULL, GL_STATIC_DRAW);
        if ((err = glGetError()) != GL_NO_ERROR)
            break;
        const GLuint zero = 0;
        glClearBufferData(GL_ARRAY_BUFFER, GL_R32UI, GL_RED_INTEGER, GL_UNSIGNED_INT, &zero);
        glFinish();
        if ((err = glGetError()) != GL_NO_ERROR)
            break;
        got += step;
        if (got % 1024 < step)
            print_memory("progress");
    }
    printf("allocated_mib=%ld stopped_by=%s\n", got,
           err == GL_OUT_OF_MEMORY ? "GL_OUT_OF_MEMORY" : err ? "another_error" : "max_mib");
    print_memory("after");
}

int main(int argc, char **argv)
{
    long step = 0, max_mib = 1L << 20;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--alloc-mib"))
            step = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-mib"))
            max_mib = atol(argv[i + 1]);
    }
    make_current();
    const char *ext = (const char *)glGetString(GL_EXTENSIONS);
    printf("renderer=%s\n", (const char *)glGetString(GL_RENDERER));
    printf("nvx_gpu_memory_info=%d\n", ext && strstr(ext, "GL_NVX_gpu_memory_info") != NULL);
    print_memory("before");
    if (step > 0)
        allocate(step, max_mib);
    return 0;
}
