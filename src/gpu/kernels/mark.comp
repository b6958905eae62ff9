#version 450
// Completion mark: writes the call's number into the submission's slot once
// every dispatch before it in the submission is done (the recorder puts a
// barrier in front). The host reads the slots back after the fence: a slot
// without the number means the driver dropped work.
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Marks { uint marks[]; };
layout(push_constant) uniform Push { uint slot; uint call; } p;

void main() { marks[p.slot] = p.call; }
