// Protobuf base-128 varint encoder, 64-bit, one value per cycle
// (combinational; register the outputs where the pipeline needs it).
//
// `zigzag` selects the sint32/sint64 mapping (n << 1) ^ (n >> 63) before
// encoding, as protobuf does for sint fields. Byte i of the encoding is
// bytes[8*i +: 8] (byte 0 goes on the wire first); `len` is 1..10, and
// bytes past `len` are zero. Matches prost's `encode_varint`.
`timescale 1ns / 1ps
`default_nettype none

module varint_encoder (
    input  wire [63:0] value,
    input  wire        zigzag,
    output reg  [79:0] bytes,
    output reg  [3:0]  len
);
    wire [63:0] mapped = zigzag ? ({value[62:0], 1'b0} ^ {64{value[63]}}) : value;
    // Ten groups of seven bits, the last one holding bit 63 alone.
    wire [69:0] groups = {6'b0, mapped};

    integer i;
    always @* begin
        len = 4'd1;
        for (i = 1; i < 10; i = i + 1) begin
            if (groups[7*i +: 7] != 7'd0) len = i[3:0] + 4'd1;
        end
        bytes = 80'd0;
        for (i = 0; i < 10; i = i + 1) begin
            if (i[3:0] < len) begin
                bytes[8*i +: 7] = groups[7*i +: 7];
                bytes[8*i + 7]  = (i[3:0] + 4'd1 < len);
            end
        end
    end
endmodule

`default_nettype wire
