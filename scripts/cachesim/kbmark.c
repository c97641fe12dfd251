/*
 * A static x86_64 guest program that executes cachesim's window marker and
 * exits: built with -DMARK=1 (nopl 0x4b420001(%rax), the window opens) and
 * -DMARK=2 (nopl 0x4b420002(%rax), it closes). No libc: -nostdlib -static.
 */
#ifndef MARK
#error "build with -DMARK=1 or -DMARK=2"
#endif
#define STR(x) #x
#define XSTR(x) STR(x)

void _start(void)
{
    __asm__ volatile(".byte 0x0f,0x1f,0x80,0x0" XSTR(MARK) ",0x00,0x42,0x4b");
    __asm__ volatile("mov $60, %eax; xor %edi, %edi; syscall");
}
