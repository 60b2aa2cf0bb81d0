// Protobuf base-128 varint decoder, 64-bit, one varint per cycle
// (combinational).
//
// Input: up to ten bytes of a stream, byte 0 (the first on the wire) in
// bytes[7:0], of which `avail` (0..10) are valid. Outputs:
// - `len`: bytes the varint takes (1..10) when `ok`;
// - `incomplete`: no terminating byte among the `avail` bytes and fewer
//   than ten given: wait for more input;
// - `malformed`: ten bytes without a terminator, or a tenth byte above 1
//   (the value would not fit 64 bits) - prost refuses both ("invalid
//   varint");
// - `value`: the decoded value, zigzag-decoded when `zigzag` (sint fields).
`timescale 1ns / 1ps
`default_nettype none

module varint_decoder (
    input  wire [79:0] bytes,
    input  wire [3:0]  avail,
    input  wire        zigzag,
    output reg  [63:0] value,
    output reg  [3:0]  len,
    output reg         ok,
    output reg         incomplete,
    output reg         malformed
);
    reg [63:0] raw;
    reg        found;
    integer i;
    always @* begin
        found = 1'b0;
        len = 4'd0;
        raw = 64'd0;
        for (i = 0; i < 10; i = i + 1) begin
            if (!found && i[3:0] < avail) begin
                // Group 9 holds bit 63 only; its other bits must be zero
                // (checked below as `malformed`).
                if (i < 9) raw[7*i +: 7] = bytes[8*i +: 7];
                else raw[63] = bytes[72];
                if (!bytes[8*i + 7]) begin
                    found = 1'b1;
                    len = i[3:0] + 4'd1;
                end
            end
        end
        malformed = (!found && avail >= 4'd10) || (found && len == 4'd10 && bytes[78:72] > 7'd1);
        incomplete = !found && avail < 4'd10;
        ok = found && !malformed;
        if (!ok) begin
            value = 64'd0;
            len = 4'd0;
        end else if (zigzag) begin
            value = {1'b0, raw[63:1]} ^ {64{raw[0]}};
        end else begin
            value = raw;
        end
    end
endmodule

`default_nettype wire
